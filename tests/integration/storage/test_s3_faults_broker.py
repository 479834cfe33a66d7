"""Faults between the broker and S3 (a proxy answering 500s, slowly, or
dropping connections): produce keeps being acknowledged from the file WAL,
uploads complete once the faults stop, and after SIGTERM a fresh broker with
an empty data directory (straight to S3) serves every acknowledged record
exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from tests.integration.broker.conftest import create_topic
from tests.integration.s3stream.fault_proxy import FaultProxy
from tests.integration.storage.conftest import new_prefix, s3_keys, storage_env
from tests.integration.storage.test_stateless_broker import (
    _end_offsets,
    _Producer,
    _values,
    _wait,
)
from tests.support.platform import TidelakeProcess


def test_produce_survives_s3_faults_and_uploads_complete_after_them(
    tmp_path: Path, moto_endpoint: str
) -> None:
    proxy = FaultProxy(moto_endpoint, delay=2.0).start()
    prefix = new_prefix()
    storage = {"upload_size_bytes": "65536", "upload_interval_ms": "200"}
    env = storage_env(proxy.endpoint, prefix, tmp_path / "meta.db", "file", **storage)
    broker = TidelakeProcess(tmp_path / "data-1", env=env).start()
    fresh: TidelakeProcess | None = None
    producer: _Producer | None = None
    try:
        topic = "faults"
        create_topic(broker.bootstrap, topic, partitions=3)
        producer = _Producer(broker.bootstrap, topic)
        producer.start()
        _wait(lambda: len(producer.acked) >= 1000, 60, "acknowledgements before the faults")
        proxy.mode = "mixed"
        before = len(producer.acked)
        time.sleep(4)
        assert proxy.faults > 0
        assert len(producer.acked) > before + 500, "produce stalled while S3 failed"
        proxy.mode = "ok"
        during = len(producer.acked)
        _wait(lambda: len(producer.acked) >= during + 1000, 60, "acknowledgements after")
        producer.stop.set()
        producer.join(30)
        acked = set(producer.acked)
        assert broker.stop(timeout=60) == 0  # SIGTERM uploads the rest
        assert [k for k in s3_keys(moto_endpoint, prefix) if k.startswith("streams/")]

        direct = storage_env(moto_endpoint, prefix, tmp_path / "meta.db", "file")
        fresh = TidelakeProcess(tmp_path / "data-2", env=direct).start()
        values = _values(fresh.bootstrap, topic, _end_offsets(fresh.bootstrap, topic))
        dupes = [v for v, c in Counter(values).items() if c > 1]
        assert not dupes, f"duplicated records {dupes[:10]}"
        missing = sorted(acked - set(values))
        assert not missing, f"{len(missing)} acknowledged records lost: {missing[:10]}"
    finally:
        if producer is not None and producer.is_alive():
            producer.stop.set()
        broker.kill()
        if fresh is not None:
            fresh.stop()
        proxy.close()


def test_backpressure_while_s3_is_down_then_produce_resumes_without_loss(
    tmp_path: Path, moto_endpoint: str
) -> None:
    """With S3 down, pending uploads reach ``max_pending_upload_bytes``; the
    broker answers produce with a retriable error and a throttle time instead
    of failing or dropping data; when S3 is back the producer's retries land."""
    proxy = FaultProxy(moto_endpoint).start()
    prefix = new_prefix()
    storage = {
        "upload_size_bytes": "65536",
        "upload_interval_ms": "100",
        "max_pending_upload_bytes": "1048576",
    }
    env = storage_env(proxy.endpoint, prefix, tmp_path / "meta.db", "file", **storage)
    broker = TidelakeProcess(tmp_path / "data", env=env).start()
    producer: _Producer | None = None
    try:
        topic = "backpressure"
        create_topic(broker.bootstrap, topic, partitions=3)
        # The client keeps retrying through the outage (its default timeout is
        # 5 minutes): refusals must end in acknowledgements, not in failures.
        producer = _Producer(broker.bootstrap, topic, message_timeout_ms=120_000)
        producer.start()
        _wait(lambda: len(producer.acked) >= 1000, 60, "acknowledgements before the outage")
        proxy.mode = "error"
        time.sleep(2)  # the pending bytes fill up
        stalled = len(producer.acked)
        time.sleep(2)
        assert len(producer.acked) - stalled < 200, "appends were not refused while S3 was down"
        proxy.mode = "ok"
        _wait(lambda: len(producer.acked) >= stalled + 2000, 60, "acknowledgements after")
        producer.stop.set()
        producer.join(30)
        assert producer.failed == 0
        acked = set(producer.acked)
        values = _values(broker.bootstrap, topic, _end_offsets(broker.bootstrap, topic))
        assert not [v for v, c in Counter(values).items() if c > 1]
        assert acked <= set(values)
    finally:
        if producer is not None and producer.is_alive():
            producer.stop.set()
        broker.stop()
        proxy.close()
