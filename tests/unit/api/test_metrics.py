"""Metrics pieces without a platform: Kafka request counting, HTTP route
latency, the OTLP conversion, one registry per process."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.metrics.http import HttpLatency
from api.metrics.kafka import KafkaRequestMetrics
from api.metrics.otlp import to_otlp
from api.settings import load_settings
from ingest.errors import ConfigError
from ingest.protocol.records import build_batch


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def _produce(records: bytes, error_code: int) -> tuple[SimpleNamespace, SimpleNamespace]:
    request = SimpleNamespace(
        topic_data=(
            SimpleNamespace(name="t", partition_data=(SimpleNamespace(index=0, records=records),)),
        )
    )
    response = SimpleNamespace(
        responses=(
            SimpleNamespace(
                name="t",
                partition_responses=(SimpleNamespace(index=0, error_code=error_code),),
            ),
        )
    )
    return request, response


def test_accepted_produce_counts_bytes_and_records_per_partition() -> None:
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry, lambda _id: None)
    batch = build_batch([(b"k", b"v1", [], 0), (None, b"v2", [], 0), (b"k", b"v3", [], 0)])
    metrics.observe(0, 0.002, *_produce(batch, 0))
    assert _sample(registry, "tidelake_topic_records_in_total", topic="t", partition="0") == 3
    assert _sample(registry, "tidelake_topic_bytes_in_total", topic="t", partition="0") == len(
        batch
    )
    assert _sample(registry, "tidelake_kafka_request_seconds_count", api="produce") == 1


def test_partition_traffic_adds_up_and_is_exposed_as_counters() -> None:
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry, lambda _id: None)
    batch = build_batch([(None, b"v", [], 0), (None, b"w", [], 0)])
    for _ in range(3):
        metrics.observe(0, 0.001, *_produce(batch, 0))
    assert _sample(registry, "tidelake_topic_records_in_total", topic="t", partition="0") == 6
    assert _sample(registry, "tidelake_topic_bytes_in_total", topic="t", partition="0") == 3 * len(
        batch
    )
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    for name in (
        "tidelake_topic_bytes_in",
        "tidelake_topic_records_in",
        "tidelake_topic_bytes_out",
    ):
        assert families[name].type == "counter"
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        KafkaRequestMetrics(registry, lambda _id: None)  # one set of these names per registry


def test_refused_produce_counts_the_error_code_and_no_records() -> None:
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry, lambda _id: None)
    batch = build_batch([(b"k", b"v", [], 0)])
    metrics.observe(0, 0.001, *_produce(batch, 3))
    assert (
        _sample(
            registry,
            "tidelake_kafka_partition_errors_total",
            api="Produce",
            error="unknown_topic_or_partition",
        )
        == 1
    )
    assert _sample(registry, "tidelake_topic_records_in_total", topic="t", partition="0") is None


def test_fetch_by_topic_id_is_counted_under_the_topic_name() -> None:
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry, {"id-1": "orders"}.get)
    batch = build_batch([(None, b"a", [], 0), (None, b"b", [], 0)])
    response = SimpleNamespace(
        responses=(
            SimpleNamespace(
                topic_id="id-1",
                partitions=(SimpleNamespace(partition_index=2, error_code=0, records=batch),),
            ),
        )
    )
    metrics.observe(1, 0.01, None, response)
    assert _sample(registry, "tidelake_topic_records_out_total", topic="orders", partition="2") == 2


def test_an_observer_never_raises_on_an_entity_it_does_not_understand() -> None:
    metrics = KafkaRequestMetrics(CollectorRegistry(), lambda _id: None)
    metrics.observe(0, 0.001, object(), object())  # no exception: requests must not fail


def test_two_platforms_in_one_process_keep_their_own_metrics() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    KafkaRequestMetrics(a, lambda _id: None).observe(18, 0.001, None, None)
    KafkaRequestMetrics(b, lambda _id: None)  # the same names again: no clash
    assert _sample(a, "tidelake_kafka_request_seconds_count", api="api_versions") == 1
    assert _sample(b, "tidelake_kafka_request_seconds_count", api="api_versions") is None


def test_http_latency_is_labelled_by_route_template_and_status() -> None:
    registry = CollectorRegistry()
    latency = HttpLatency(registry)
    app = FastAPI()
    app.add_middleware(
        latency.middleware(lambda path: "catalog" if path.startswith("/v1/") else "api")
    )

    @app.get("/v1/things/{name}")
    def thing(name: str) -> dict[str, str]:
        return {"name": name}

    client = TestClient(app)
    assert client.get("/v1/things/a").status_code == 200
    assert client.get("/v1/things/b").status_code == 200
    assert client.get("/nope").status_code == 404
    assert (
        _sample(
            registry,
            "tidelake_http_request_seconds_count",
            service="catalog",
            method="GET",
            route="/v1/things/{name}",
            status="200",
        )
        == 2
    )
    assert (
        _sample(
            registry,
            "tidelake_http_request_seconds_count",
            service="api",
            method="GET",
            route="unmatched",
            status="404",
        )
        == 1
    )


def test_otlp_histograms_carry_per_bucket_counts_and_counters_are_monotonic_sums() -> None:
    registry = CollectorRegistry()
    h = Histogram("lat_seconds", "latency", ["api"], buckets=(0.1, 1.0), registry=registry)
    for v in (0.05, 0.5, 0.7, 5.0):
        h.labels("produce").observe(v)
    metrics = KafkaRequestMetrics(registry, lambda _id: None)
    metrics.observe(0, 0.001, *_produce(build_batch([(None, b"v", [], 0)]), 0))
    request = to_otlp(registry.collect(), {"service.name": "tidelake"}, now_ns=1)
    by_name = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}
    point = by_name["lat_seconds"].histogram.data_points[0]
    assert list(point.explicit_bounds) == [0.1, 1.0]
    assert list(point.bucket_counts) == [1, 2, 1] and point.count == 4
    assert abs(point.sum - 6.25) < 1e-9
    records = by_name["tidelake_topic_records_in"].sum
    assert records.is_monotonic and records.data_points[0].as_double == 1
    # the exposition text and the push agree on the families
    text = generate_latest(registry).decode()
    text_names = {f.name for f in text_string_to_metric_families(text)}
    text_names = {n for n in text_names if not n.endswith("_created")}  # timestamps, not metrics
    assert set(by_name) == text_names


def test_metrics_section_is_read_from_the_file_and_a_bad_otlp_endpoint_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "tidelake.toml"
    config.write_text(
        '[metrics]\notlp_endpoint = "http://collector:4318/"\notlp_interval_s = 10\n'
        "history_interval_s = 2\n"
    )
    metrics = load_settings(config).metrics
    assert metrics.otlp_endpoint == "http://collector:4318"
    assert (metrics.otlp_interval_s, metrics.history_interval_s) == (10, 2)
    config.write_text('[metrics]\notlp_endpoint = "collector:4318"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert err.value.key == "metrics.otlp_endpoint"
