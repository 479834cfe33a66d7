"""The HTTP API on the ``--http-listen`` address.

The catalog room's app (Iceberg REST catalog at ``/v1``, catalog browsing at
``/api/v1/catalog``, the web page at ``/ui``) plus the platform's own admin
endpoints: broker topics, table topic status, health and Prometheus metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.responses import PlainTextResponse
from pyiceberg.catalog import Catalog

from catalog.app import create_app as create_catalog_app
from catalog.config import CatalogSettings

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["create_http_app"]

StatusSource = Callable[[], list[dict[str, Any]]]


def _topic_json(broker: Broker, name: str) -> dict[str, Any]:
    topic = broker.logs.get(name)
    if topic is None:
        raise HTTPException(404, f"topic {name!r} does not exist")
    assert topic.config is not None
    return {
        "name": name,
        "topic_id": str(topic.topic_id),
        "partitions": [
            {
                "partition": p.partition,
                "log_start_offset": p.log_start_offset,
                "high_watermark": p.high_watermark,
                "leader": broker.config.node_id,
            }
            for p in topic.partitions
        ],
        "configs": dict(topic.config.overrides),
    }


def _admin_router(broker: Broker, table_status: StatusSource | None) -> APIRouter:
    # async endpoints: they read the broker's in-memory state, which only the
    # event loop may touch (a threadpool endpoint could see it mid-change).
    r = APIRouter(prefix="/api/v1", tags=["admin"])

    @r.get("/broker", summary="Cluster id, node, listener and topic count")
    async def broker_info() -> dict[str, Any]:
        return {
            "cluster_id": broker.cluster_id,
            "node_id": broker.config.node_id,
            "kafka_listener": f"{broker.config.public_host}:{broker.port}",
            "topics": len(broker.logs.topics),
        }

    @r.get("/topics", summary="Topics with partitions, offsets and config overrides")
    async def topics() -> list[dict[str, Any]]:
        return [_topic_json(broker, n) for n in sorted(broker.logs.topics)]

    @r.get("/topics/{name}", summary="One topic")
    async def topic(name: str) -> dict[str, Any]:
        return _topic_json(broker, name)

    @r.get(
        "/table-topics",
        summary="Table topic status: lag, freshness, rows/s, files per commit, dead letters",
    )
    async def table_topics() -> list[dict[str, Any]]:
        return table_status() if table_status is not None else []

    return r


def _metrics(broker: Broker, table_status: StatusSource | None) -> str:
    lines = [
        "# HELP tidelake_partition_high_watermark Next offset a consumer can read.",
        "# TYPE tidelake_partition_high_watermark gauge",
    ]
    for name, topic in sorted(broker.logs.topics.items()):
        for p in topic.partitions:
            lines.append(
                f'tidelake_partition_high_watermark{{topic="{name}",partition="{p.partition}"}} {p.high_watermark}'
            )
    lines += [
        "# HELP tidelake_partition_log_start_offset First retained offset.",
        "# TYPE tidelake_partition_log_start_offset gauge",
    ]
    for name, topic in sorted(broker.logs.topics.items()):
        for p in topic.partitions:
            lines.append(
                f'tidelake_partition_log_start_offset{{topic="{name}",partition="{p.partition}"}} {p.log_start_offset}'
            )
    engine = broker.engine
    for attr, help_text in (
        ("uploads", "Objects uploaded by the stream engine."),
        ("uploaded_bytes", "Bytes uploaded by the stream engine."),
    ):
        value = getattr(engine, attr, None)
        if isinstance(value, int):
            lines += [
                f"# HELP tidelake_storage_{attr}_total {help_text}",
                f"# TYPE tidelake_storage_{attr}_total counter",
                f"tidelake_storage_{attr}_total {value}",
            ]
    if table_status is not None:
        rows = table_status()
        for key, kind in (
            ("lag", "gauge"),
            ("freshness_ms", "gauge"),
            ("dead_letters", "counter"),
            ("rows_committed", "counter"),
        ):
            lines += [f"# TYPE tidelake_table_topic_{key} {kind}"]
            for row in rows:
                if isinstance(row.get(key), int | float):
                    lines.append(
                        f'tidelake_table_topic_{key}{{topic="{row.get("topic")}"}} {row[key]}'
                    )
    return "\n".join(lines) + "\n"


def create_http_app(
    catalog_settings: CatalogSettings,
    catalog: Catalog | None,
    broker: Broker,
    table_status: StatusSource | None = None,
) -> FastAPI:
    app = create_catalog_app(catalog_settings, catalog=catalog)
    app.title = "Tidelake"
    app.description = (
        "Iceberg REST catalog (/v1), catalog browsing (/api/v1/catalog), broker and table topic "
        "admin (/api/v1), web page (/ui), Prometheus metrics (/metrics)."
    )
    app.include_router(_admin_router(broker, table_status))

    @app.get("/healthz", tags=["admin"], summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/metrics", tags=["admin"], response_class=PlainTextResponse, summary="Prometheus metrics"
    )
    async def metrics() -> str:
        return _metrics(broker, table_status)

    return app
