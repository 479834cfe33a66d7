"""/metrics of a running platform with traffic, the Grafana dashboard over it,
and the same metrics pushed over OTLP/HTTP."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.api.conftest import OtlpReceiver
from tests.integration.api.console_data import SampleData

DASHBOARD = Path(__file__).resolve().parents[3] / "api" / "console" / "grafana-dashboard.json"


def scrape(data: SampleData) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Samples by family name: (sample name, labels, value)."""
    r = httpx.get(f"{data.platform.http_url}/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {
        f.name: [(s.name, s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(r.text)
    }


def value(
    families: dict[str, list[tuple[str, dict[str, str], float]]], sample: str, **labels: str
) -> float:
    family = re.sub(r"(_total|_count|_sum|_bucket)$", "", sample)
    found = [
        v
        for name, got, v in families.get(family, [])
        if name == sample and all(got.get(k) == w for k, w in labels.items())
    ]
    assert found, f"no sample {sample}{labels}"
    return sum(found)


def test_metrics_count_traffic_latency_lag_storage_and_table_topics(data: SampleData) -> None:
    m = scrape(data)
    assert value(m, "tidelake_topic_records_in_total", topic="orders", partition="0") == 6
    assert value(m, "tidelake_topic_bytes_in_total", topic="orders", partition="0") > 6 * 10
    assert value(m, "tidelake_topic_records_out_total", topic="orders") >= 1  # billing polled
    assert value(m, "tidelake_partition_high_watermark", topic="orders", partition="1") == 6
    assert value(m, "tidelake_kafka_request_seconds_count", api="produce") >= 1
    assert value(m, "tidelake_kafka_request_seconds_count", api="fetch") >= 1
    assert (
        value(m, "tidelake_consumer_group_lag", group="billing", topic="orders", partition="0") == 2
    )
    assert value(m, "tidelake_consumer_group_committed_offset", group="billing", partition="1") == 4
    assert value(m, "tidelake_table_topic_rows_committed_total", topic="clicks") == 40
    assert value(m, "tidelake_table_topic_lag", topic="clicks") == 0
    assert value(m, "tidelake_table_topic_commits_total", topic="clicks") >= 1
    commits = value(m, "tidelake_table_topic_commit_seconds_count", topic="clicks")
    assert commits == value(m, "tidelake_table_topic_commits_total", topic="clicks")
    assert 0 < value(m, "tidelake_table_topic_commit_seconds_sum", topic="clicks") < commits * 30
    appends = value(m, "tidelake_storage_wal_append_seconds_count")
    assert appends >= 2
    assert value(m, "tidelake_storage_wal_append_seconds_bucket", le="+Inf") == appends
    syncs = value(m, "tidelake_storage_wal_sync_seconds_count")
    assert 1 <= syncs <= appends  # a group commit holds one append or more
    assert value(m, "tidelake_storage_wal_sync_seconds_bucket", le="2.5") <= syncs
    assert value(m, "tidelake_event_loop_lag_seconds_count") >= 1
    assert value(m, "tidelake_event_loop_lag_max_seconds") >= 0
    assert value(m, "tidelake_storage_log_cache_hits_total") >= 1  # billing read the tail
    assert 0 < value(m, "tidelake_storage_log_cache_hit_ratio") <= 1
    assert value(m, "tidelake_http_request_seconds_count", service="registry", method="POST") == 2
    assert (
        value(m, "tidelake_http_request_seconds_count", service="api", route="/api/v1/table-topics")
        >= 1
    )


def test_fetch_errors_are_counted_by_error_code(data: SampleData) -> None:
    before = scrape(data).get("tidelake_kafka_partition_errors", [])
    consumer = Consumer(
        {
            "bootstrap.servers": data.platform.bootstrap,
            "group.id": "probe",
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition("orders", 0, 1000)])  # past the end
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                break
    finally:
        consumer.close()
    m = scrape(data)
    errors = value(
        m, "tidelake_kafka_partition_errors_total", api="Fetch", error="offset_out_of_range"
    )
    old = sum(v for n, lab, v in before if lab.get("error") == "offset_out_of_range")
    assert errors > old


def test_every_metric_the_grafana_dashboard_queries_is_on_metrics(data: SampleData) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queried = {n for e in exprs for n in re.findall(r"\btidelake_[a-z0-9_]+", e)}
    assert len(queried) >= 15
    text = httpx.get(f"{data.platform.http_url}/metrics", timeout=10).text
    exposed = set()
    for f in text_string_to_metric_families(text):
        exposed.add(f.name)
        exposed.update(s.name for s in f.samples)
        if f.type == "counter":
            exposed.add(f.name + "_total")
        if f.type in ("histogram", "summary"):
            exposed.update(f.name + s for s in ("_bucket", "_sum", "_count"))
    assert queried - exposed == set()


def test_otlp_push_carries_the_metrics_of_metrics(data: SampleData, otlp: OtlpReceiver) -> None:
    deadline = time.monotonic() + 20
    found: dict[str, object] = {}
    while time.monotonic() < deadline and "records" not in found:
        for request in reversed(otlp.requests):
            metrics = {
                m.name: m
                for rm in request.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
            }
            records = metrics.get("tidelake_topic_records_in")
            if records is None:
                continue
            points = {
                tuple(sorted((a.key, a.value.string_value) for a in p.attributes)): p.as_double
                for p in records.sum.data_points
            }
            if points.get((("partition", "0"), ("topic", "orders"))) == 6:
                found = {"records": records, "metrics": metrics, "request": request}
                break
        time.sleep(0.5)
    assert found, f"{len(otlp.requests)} pushes, none with the orders records"
    records = found["records"]
    assert records.sum.is_monotonic  # type: ignore[attr-defined]
    metrics = found["metrics"]
    latency = metrics["tidelake_kafka_request_seconds"]  # type: ignore[index]
    produce = [
        p
        for p in latency.histogram.data_points
        if any(a.key == "api" and a.value.string_value == "produce" for a in p.attributes)
    ]
    assert produce and produce[0].count == sum(produce[0].bucket_counts) >= 1
    lag = metrics["tidelake_consumer_group_lag"]  # type: ignore[index]
    assert sum(p.as_double for p in lag.gauge.data_points) == 4
    resource = found["request"].resource_metrics[0].resource  # type: ignore[attr-defined]
    assert {a.key: a.value.string_value for a in resource.attributes}["service.name"] == "tidelake"
    assert set(otlp.content_types) == {"application/x-protobuf"}
