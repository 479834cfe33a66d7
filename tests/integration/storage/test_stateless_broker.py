"""Stateless brokers on S3 (moto): SIGTERM flushes the WAL to object storage;
a fresh broker with an empty data directory serves every partition's full
data; after kill -9 every acknowledged record is there exactly once (object
WAL: on a fresh broker; file WAL: on the same data directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker.conftest import consume_range, create_topic, quiet
from tests.integration.storage.conftest import new_prefix, s3_keys, storage_env
from tests.support.platform import TidelakeProcess

PARTITIONS = 3


class _Producer(threading.Thread):
    """Produces numbered records round-robin over the partitions until stopped."""

    def __init__(
        self, bootstrap: str, topic: str, size: int = 200, message_timeout_ms: int = 8000
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.pad = b"x" * size
        self.producer = Producer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": message_timeout_ms,
                    "reconnect.backoff.max.ms": 200,
                }
            )
        )
        self.acked: set[int] = set()
        self.failed = 0
        self.sent = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        n = int(msg.value().split(b":")[0])
        with self.lock:
            if err is None:
                self.acked.add(n)
            else:
                self.failed += 1

    def run(self) -> None:
        while not self.stop.is_set():
            n = self.sent
            try:
                self.producer.produce(
                    self.topic,
                    value=b"%d:" % n + self.pad,
                    partition=n % PARTITIONS,
                    on_delivery=self._on_delivery,
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.sent += 1
            self.producer.poll(0)
            if n % 100 == 99:
                time.sleep(0.005)
        self.producer.flush(20)


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _end_offsets(bootstrap: str, topic: str) -> int:
    c = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": "watermarks"}))
    try:
        return sum(
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        )
    finally:
        c.close()


def _values(bootstrap: str, topic: str, count: int) -> list[int]:
    got = consume_range(bootstrap, topic, range(PARTITIONS), count, timeout=60)
    return [int(m.value().split(b":")[0]) for m in got]


def test_sigterm_flushes_to_s3_and_a_fresh_broker_serves_all_data(
    tmp_path: Path, moto_endpoint: str
) -> None:
    prefix = new_prefix()
    env = storage_env(moto_endpoint, prefix, tmp_path / "meta.db", "object")
    first = TidelakeProcess(tmp_path / "data-1", env=env).start()
    second: TidelakeProcess | None = None
    try:
        topic = "stateless"
        create_topic(first.bootstrap, topic, partitions=PARTITIONS)
        producer = _Producer(first.bootstrap, topic)
        producer.start()
        _wait(lambda: len(producer.acked) >= 3000, 60, "acknowledgements")
        producer.stop.set()
        producer.join(30)
        assert producer.failed == 0 and len(producer.acked) == producer.sent
        n = producer.sent
        tail = _values(first.bootstrap, topic, n)  # from the log cache
        assert sorted(tail) == list(range(n))

        started = time.monotonic()
        assert first.stop(timeout=20) == 0
        assert time.monotonic() - started < 15
        keys = s3_keys(moto_endpoint, prefix)
        assert not [k for k in keys if k.endswith(".wal")], "WAL objects left after SIGTERM"
        assert [k for k in keys if k.startswith("streams/")]

        inspect = subprocess.run(
            [sys.executable, "-m", "api.cli", "storage", "inspect", "--json"],
            env={**os.environ, **env, "TIDELAKE_DATA_DIR": str(tmp_path / "data-x")},
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert inspect.returncode == 0, inspect.stdout.decode() + inspect.stderr.decode()
        listing = json.loads(inspect.stdout)
        assert listing["ok"] and listing["wal_objects"] == []
        covered = {
            (r["stream"], r["start"], r["end"]) for o in listing["objects"] for r in o["ranges"]
        }
        assert sum(e - s for _sid, s, e in covered) == n  # every record in exactly one object

        second = TidelakeProcess(tmp_path / "data-2", env=env).start()  # empty data dir
        values = _values(second.bootstrap, topic, n)
        assert sorted(values) == list(range(n)), "records missing or duplicated"
    finally:
        first.kill()
        if second is not None:
            second.stop()


@pytest.mark.parametrize("wal_kind", ["object", "file"])
def test_kill_9_keeps_every_acknowledged_record_exactly_once(
    tmp_path: Path, moto_endpoint: str, wal_kind: str
) -> None:
    prefix = new_prefix()
    # uploads are rare: the acknowledged tail lives only in the WAL at the crash
    env = storage_env(
        moto_endpoint, prefix, tmp_path / "meta.db", wal_kind, upload_interval_ms="60000"
    )
    first = TidelakeProcess(tmp_path / "data-1", env=env).start()
    restarted: TidelakeProcess | None = None
    producer: _Producer | None = None
    try:
        topic = f"crash-{wal_kind}"
        create_topic(first.bootstrap, topic, partitions=PARTITIONS)
        producer = _Producer(first.bootstrap, topic)
        producer.start()
        _wait(lambda: len(producer.acked) >= 2000, 60, "acknowledgements before the crash")
        first.kill()
        producer.stop.set()
        producer.join(40)
        acked = set(producer.acked)
        assert len(acked) >= 2000
        if wal_kind == "object":
            assert [k for k in s3_keys(moto_endpoint, prefix) if k.endswith(".wal")]
        # object WAL: a fresh broker elsewhere; file WAL: the same data directory
        data = tmp_path / ("data-2" if wal_kind == "object" else "data-1")
        restarted = TidelakeProcess(data, env=env).start()
        values = _values(restarted.bootstrap, topic, _end_offsets(restarted.bootstrap, topic))
        dupes = [v for v, c in Counter(values).items() if c > 1]
        assert not dupes, f"duplicated records {dupes[:10]}"
        missing = sorted(acked - set(values))
        assert not missing, f"{len(missing)} acknowledged records lost: {missing[:10]}"
    finally:
        if producer is not None and producer.is_alive():
            producer.stop.set()
        first.kill()
        if restarted is not None:
            restarted.stop()
