"""Through the broker on S3 (moto): many small uploads are compacted to a few
objects and reads return the same records; DeleteRecords physically removes
the trimmed objects from the bucket."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.broker.conftest import consume_range, create_topic, quiet
from tests.integration.storage.conftest import new_prefix, s3_keys, storage_env
from tests.support.platform import TidelakeProcess

PARTITIONS = 2
RECORDS = 6000


def _stream_objects(endpoint: str, prefix: str) -> list[str]:
    return [k for k in s3_keys(endpoint, prefix) if k.startswith("streams/")]


def test_small_uploads_compact_and_delete_records_removes_objects(
    tmp_path: Path, moto_endpoint: str
) -> None:
    prefix = new_prefix()
    env = storage_env(
        moto_endpoint,
        prefix,
        tmp_path / "meta.db",
        "file",
        upload_size_bytes="32768",
        upload_interval_ms="100",
        compaction_interval_ms="300",
        compaction_small_bytes="1048576",
        compaction_target_bytes="8388608",
        stream_object_bytes="1048576",
        stream_object_target_bytes="8388608",
    )
    broker = TidelakeProcess(tmp_path / "data", env=env).start()
    try:
        topic = "compacted"
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        p = Producer(quiet({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}))
        for n in range(RECORDS):
            p.produce(topic, value=b"%06d:" % n + b"v" * 300, partition=n % PARTITIONS)
            if n % 500 == 499:
                p.flush(30)  # several small uploads
                time.sleep(0.15)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            keys = _stream_objects(moto_endpoint, prefix)
            if len(keys) <= 2:
                break
            time.sleep(0.5)
        assert len(keys) <= 2, f"compaction left {len(keys)} objects"
        # object ids are never reused: the highest says how many objects were written
        written = max(int(k.split("/")[1].split(".")[0]) for k in keys)
        assert written >= 12, f"expected many small uploads, saw {written} objects"
        got = consume_range(broker.bootstrap, topic, range(PARTITIONS), RECORDS, timeout=60)
        assert sorted(int(m.value()[:6]) for m in got) == list(range(RECORDS))

        admin = AdminClient(quiet({"bootstrap.servers": broker.bootstrap}))
        ends = [RECORDS // PARTITIONS] * PARTITIONS
        futures = admin.delete_records(
            [TopicPartition(topic, i, ends[i]) for i in range(PARTITIONS)]
        )
        for f in futures.values():
            f.result(30)
        deadline = time.monotonic() + 30
        while _stream_objects(moto_endpoint, prefix) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _stream_objects(moto_endpoint, prefix) == []  # physically gone
    finally:
        broker.stop()
