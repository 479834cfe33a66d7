"""A flaky, slow S3 between the broker and moto (20 % of requests answered
503 SlowDown, 20 % delayed by 200 ms) while producing with acks=all:
nothing acknowledged is lost, the broker log warns about degraded object
storage, /metrics counts the failures and retries, the admin API reports the
store degraded and producers see throttle times; once the faults stop, the
health returns to healthy."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from tests.integration.broker.conftest import create_topic, quiet
from tests.integration.storage.conftest import new_prefix, storage_env
from tests.integration.storage.test_stateless_broker import PARTITIONS, _end_offsets, _values
from tests.support.platform import TidelakeProcess
from tests.support.s3_fault_proxy import S3FaultProxy

_PRODUCE_S = 12.0  # produce under faults this long...
_MAX_RECORDS = 60_000  # ...or until this many were sent


def _metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if m is None:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


class _Produced:
    def __init__(self) -> None:
        self.acked: list[int] = []
        self.failed = 0
        self.throttled: list[int] = []
        self.lock = threading.Lock()

    def on_delivery(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.acked.append(int(msg.value().split(b":")[0]))
            else:
                self.failed += 1

    def on_throttle(self, event: Any) -> None:
        self.throttled.append(int(event.throttle_time))


def _produce(bootstrap: str, topic: str, seconds: float, limit: int) -> tuple[_Produced, int]:
    out = _Produced()
    producer = Producer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "throttle_cb": out.on_throttle,
            }
        )
    )
    pad = b"x" * 200
    sent = 0
    deadline = time.monotonic() + seconds
    while sent < limit and time.monotonic() < deadline:
        try:
            producer.produce(
                topic,
                value=b"%d:" % sent + pad,
                partition=sent % PARTITIONS,
                on_delivery=out.on_delivery,
            )
        except BufferError:
            producer.poll(0.05)
            continue
        sent += 1
        producer.poll(0)
        if sent % 100 == 0:
            time.sleep(0.005)
    assert producer.flush(150) == 0, "records still unacknowledged after the faults"
    return out, sent


@pytest.mark.parametrize("wal_kind", ["file", "object"])
def test_degraded_s3_is_warned_measured_throttled_and_recovers_without_loss(
    tmp_path: Path, moto_endpoint: str, wal_kind: str
) -> None:
    proxy = S3FaultProxy(moto_endpoint, delay=0.2).start()
    env = storage_env(
        proxy.endpoint,
        new_prefix(),
        tmp_path / "meta.db",
        wal_kind,
        upload_size_bytes="65536",
        upload_interval_ms="200",
        max_pending_upload_bytes=str(1024 * 1024),
    )
    broker = TidelakeProcess(tmp_path / "data", env=env).start()
    try:
        topic = f"degraded-{wal_kind}"
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        proxy.set_faults(fail=0.2, slow=0.2)
        produced, sent = _produce(broker.bootstrap, topic, _PRODUCE_S, _MAX_RECORDS)
        assert proxy.failed > 0

        # while still failing: the log, the metrics and the admin API say so
        log_text = broker.log_path.read_text(errors="replace")
        assert re.search(
            r"WARNING .*object storage .* is degraded: \d+ failed requests", log_text
        ), broker.log_tail()
        metrics = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
        assert (
            _metric(metrics, "tidelake_object_store_failed_attempts_total", failure="503 SlowDown")
            > 0
        )
        assert _metric(metrics, "tidelake_object_store_retries_total") > 0
        assert _metric(metrics, "tidelake_object_store_requests_total", outcome="ok") > 0
        assert _metric(metrics, "tidelake_object_store_request_seconds_count") > 0
        assert "tidelake_object_store_degraded 1" in metrics
        status = httpx.get(f"{broker.http_url}/api/v1/storage", timeout=10).json()
        assert status["state"] == "degraded", status
        assert status["error_rate"] > 0 and "503 SlowDown" in (status["last_error"] or "")

        # producers were told to back off (throttle time), not left waiting
        assert produced.throttled, "no produce response carried a throttle time"
        assert produced.failed == 0

        proxy.set_faults(fail=0.0, slow=0.0)
        deadline = time.monotonic() + 90
        # (requests sent before the faults stopped may still report failures
        # for a moment, so both views are read until they agree)
        while True:
            status = httpx.get(f"{broker.http_url}/api/v1/storage", timeout=10).json()
            metrics = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
            if status["state"] == "healthy" and "tidelake_object_store_degraded 0" in metrics:
                break
            assert time.monotonic() < deadline, f"object storage never healthy again: {status}"
            time.sleep(0.5)
        assert "is healthy again" in broker.log_path.read_text(errors="replace")

        # nothing acknowledged lost, nothing duplicated (idempotent producer)
        acked = produced.acked
        assert len(acked) == sent and len(set(acked)) == sent
        total = _end_offsets(broker.bootstrap, topic)
        values = _values(broker.bootstrap, topic, total)
        assert not [v for v, c in Counter(values).items() if c > 1]
        assert sorted(values) == sorted(acked)
    finally:
        broker.stop(timeout=60)
        proxy.close()
