"""The HTTP API on the ``--http-listen`` address.

The catalog room's app (Iceberg REST catalog at ``/v1``, catalog browsing at
``/api/v1/catalog``, the web page at ``/ui``) plus the platform's own admin
endpoints: broker topics, table topic status, health and Prometheus metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Query
from fastapi.responses import PlainTextResponse
from pyiceberg.catalog import Catalog

from api.console import mount_console
from api.http_auth import HttpAuthMiddleware, HttpSettings
from api.metrics import PlatformMetrics
from api.metrics.platform import CONTENT_TYPE
from api.metrics.settings import MetricsSettings
from catalog.app import create_app as create_catalog_app
from catalog.config import CatalogSettings
from ingest.s3stream.backpressure import storage_health
from schema_registry.auth import CredentialLookup, RegistryAuth

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


def _appended(broker: Broker) -> dict[tuple[str, int], tuple[object, int]]:
    return {
        (name, index): (plog, plog.appended_bytes)
        for name, topic in broker.logs.topics.items()
        for index, plog in topic.logs.items()
    }


async def _produce_rate(broker: Broker, sample_ms: int) -> float:
    """Record batch bytes/s appended to the partitions this broker leads,
    over ``sample_ms`` (partitions that opened or closed meanwhile are left out)."""
    before = _appended(broker)
    started = time.monotonic()
    await asyncio.sleep(sample_ms / 1000)
    elapsed = time.monotonic() - started
    total = 0
    for key, (plog, count) in _appended(broker).items():
        old = before.get(key)
        if old is not None and old[0] is plog:
            total += count - old[1]
    return total / elapsed if elapsed > 0 else 0.0


def _cluster_json(broker: Broker) -> dict[str, Any]:
    """Brokers, controller, partition leaders and moves in flight, as this
    broker sees them (a single broker is a cluster of one)."""
    member = broker.member
    if member is None:
        me = broker.cluster.brokers()[0]
        leaders = [
            {"topic": n, "partition": i, "leader": me.node_id, "leader_epoch": 0, "target": None}
            for n, t in sorted(broker.logs.topics.items())
            for i in range(t.partition_count)
        ]
        brokers = [
            {
                "node_id": me.node_id,
                "host": me.host,
                "port": me.port,
                "rack": me.rack,
                "live": True,
                "draining": False,
            }
        ]
    else:
        live = {e.node_id for e in member.brokers()}
        leaders = [
            {
                "topic": a.topic,
                "partition": a.partition,
                "leader": a.leader,
                "leader_epoch": a.leader_epoch,
                "target": a.target if a.target != a.leader else None,
            }
            for a in member.assignments()
        ]
        brokers = [
            {
                "node_id": b.node_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "live": b.node_id in live,
                "draining": b.draining,
            }
            for b in member.registered_brokers()
        ]
    for b in brokers:
        b["partitions"] = sum(1 for p in leaders if p["leader"] == b["node_id"])
    return {
        "cluster_id": broker.cluster_id,
        "node_id": broker.cluster.node_id,
        "clustered": member is not None,
        "controller": broker.cluster.controller_id(),
        "brokers": brokers,
        "partitions": leaders,
        "moves_in_flight": [
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "from": p["leader"],
                "to": p["target"],
            }
            for p in leaders
            if p["target"] is not None
        ],
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

    @r.get(
        "/cluster",
        summary="Brokers, controller, partition leaders, moves in flight, and this "
        "broker's produce bytes/s (sampled over sample_ms)",
    )
    async def cluster(sample_ms: int = Query(1000, ge=0, le=10_000)) -> dict[str, Any]:
        rate = await _produce_rate(broker, sample_ms) if sample_ms else None
        out = _cluster_json(broker)  # after the sample: the freshest view
        out["produce_bytes_per_s"] = rate
        out["sample_ms"] = sample_ms
        if broker.member is not None:  # last load reports, this broker's balancing decisions
            out["balancer"] = await broker.member.balancer_status()
        return out

    @r.get("/topics", summary="Topics with partitions, offsets and config overrides")
    async def topics() -> list[dict[str, Any]]:
        return [_topic_json(broker, n) for n in sorted(broker.logs.topics)]

    @r.get("/topics/{name}", summary="One topic")
    async def topic(name: str) -> dict[str, Any]:
        return _topic_json(broker, name)

    @r.get(
        "/storage",
        summary="Object storage health (healthy/degraded, error rate, last error) and upload backlog",
    )
    async def storage() -> dict[str, Any]:
        return storage_health(broker.engine)

    @r.get(
        "/table-topics",
        summary="Table topic status: lag, freshness, rows/s, files per commit, dead letters",
    )
    async def table_topics() -> list[dict[str, Any]]:
        return table_status() if table_status is not None else []

    return r


def create_http_app(
    catalog_settings: CatalogSettings,
    catalog: Catalog | None,
    broker: Broker,
    table_status: StatusSource | None = None,
    metrics: PlatformMetrics | None = None,
    registry: Any | None = None,
    metrics_settings: MetricsSettings | None = None,
    http_settings: HttpSettings | None = None,
    credentials: CredentialLookup | None = None,
) -> FastAPI:
    """``metrics``: the process's metrics (one is made if not given);
    ``registry``: a schema registry service the console decodes records with;
    ``http_settings.auth = "basic"`` asks ``credentials``' users to log in."""
    metrics_settings = metrics_settings or MetricsSettings()
    app = create_catalog_app(catalog_settings, catalog=catalog)
    app.title = "Tidelake"
    app.description = (
        "Iceberg REST catalog (/v1), catalog browsing (/api/v1/catalog), broker and table topic "
        "admin (/api/v1), web page (/ui), Prometheus metrics (/metrics)."
    )
    metrics = metrics or PlatformMetrics(broker, table_status)
    app.add_middleware(
        metrics.http.middleware(lambda path: "catalog" if path.startswith("/v1/") else "api")
    )
    app.include_router(_admin_router(broker, table_status))
    mount_console(
        app,
        broker,
        table_status,
        registry,
        history_interval_s=metrics_settings.history_interval_s,
        history_samples=metrics_settings.history_samples,
    )

    @app.get("/healthz", tags=["admin"], summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/metrics", tags=["admin"], response_class=PlainTextResponse, summary="Prometheus metrics"
    )
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(await metrics.scrape(), media_type=CONTENT_TYPE)

    http_settings = http_settings or HttpSettings()
    if http_settings.auth == "basic":
        login = RegistryAuth(frozenset({"basic"}), credentials)
        app.add_middleware(
            HttpAuthMiddleware, auth=login, protect_metrics=http_settings.protect_metrics
        )
    return app
