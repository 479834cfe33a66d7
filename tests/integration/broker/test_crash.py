"""kill -9 (or stop) the broker under an acks=all idempotent producer, restart it
on the same data directory, and find every acknowledged record exactly once, in
order."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker.conftest import (
    BROKER_ENV,
    RECENT_TS,
    consume_range,
    create_topic,
    quiet,
)
from tests.support.platform import TidelakeProcess

PARTITIONS = 3


class _NumberedProducer(threading.Thread):
    """Produces "<n>" to partition n % PARTITIONS until stopped; records acknowledgements."""

    def __init__(self, bootstrap: str, topic: str, acks: str, idempotent: bool) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": acks,
                    "enable.idempotence": idempotent,
                    "linger.ms": 2,
                    "message.timeout.ms": 90_000,
                    "reconnect.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                }
            )
        )
        self.acked: list[tuple[int, int, int]] = []  # (partition, offset, n)
        self.failed: list[tuple[int, Any]] = []
        self.sent = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        n = int(msg.value())
        with self.lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), n))
            else:
                self.failed.append((n, err))

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def run(self) -> None:
        while not self.stop.is_set():
            n = self.sent
            try:
                self.producer.produce(
                    self.topic,
                    value=str(n).encode(),
                    partition=n % PARTITIONS,
                    on_delivery=self._on_delivery,
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.sent += 1
            self.producer.poll(0)
            if n % 50 == 49:
                time.sleep(0.005)  # a steady stream, not one burst
        self.producer.flush(120)


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("how", "acks", "idempotent"),
    [("kill-9", "all", True), ("sigterm", "all", True), ("kill-9", "1", False)],
    ids=["kill-9-idempotent", "sigterm-idempotent", "kill-9-acks-1"],
)
def test_acknowledged_records_survive_a_restart_at_their_acknowledged_offsets(
    tmp_path: Path, how: str, acks: str, idempotent: bool
) -> None:
    """Every acknowledged record is there after the restart, at the offset it was
    acknowledged with (acks=1 is durable too: the WAL fsyncs before any ack).
    Without idempotence a retried record may appear twice; with it, never."""
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=BROKER_ENV).start()
    topic = "crash-numbers"
    producer: _NumberedProducer | None = None
    restarted: TidelakeProcess | None = None
    try:
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        producer = _NumberedProducer(broker.bootstrap, topic, acks, idempotent)
        producer.start()
        _wait(lambda: producer.acked_count() >= 1500, 60, "acknowledgements before the crash")
        if how == "kill-9":
            broker.kill()
        else:
            assert broker.stop() == 0
        acked_before_crash = producer.acked_count()
        sent_at_crash = producer.sent
        restarted = TidelakeProcess(data, env=BROKER_ENV, kafka_port=broker.kafka_port).start()
        _wait(
            lambda: producer.acked_count() >= acked_before_crash + 1500,
            90,
            "acknowledgements after the restart",
        )
        producer.stop.set()
        producer.join(150)
        assert not producer.is_alive()
        assert producer.sent > sent_at_crash

        acked = list(producer.acked)
        assert not producer.failed, producer.failed[:5]
        assert len(acked) == producer.sent  # every record was acknowledged in the end

        c = Consumer(quiet({"bootstrap.servers": restarted.bootstrap, "group.id": "wm"}))
        try:
            ends = [
                c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)
            ]
        finally:
            c.close()
        got = consume_range(restarted.bootstrap, topic, range(PARTITIONS), sum(ends), timeout=60)
        assert len(got) == sum(ends)
        by_partition: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        for m in got:
            by_partition[m.partition()].append((m.offset(), int(m.value())))
        for p in range(PARTITIONS):
            values = [n for _o, n in by_partition[p]]
            offsets = [o for o, _n in by_partition[p]]
            assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous"
            if idempotent:
                dupes = [n for n, c in Counter(values).items() if c > 1]
                assert not dupes, f"partition {p}: duplicated records {dupes[:10]}"
                assert values == sorted(values), f"partition {p}: records out of order"
            # The acknowledged offset of each record holds that record.
            at = dict(by_partition[p])
            wrong = [(o, n, at.get(o)) for pp, o, n in acked if pp == p and at.get(o) != n]
            assert not wrong, f"partition {p}: acknowledged offsets hold other records {wrong[:5]}"
            assert set(values) == {n for pp, _o, n in acked if pp == p}
    finally:
        if producer is not None and producer.is_alive():
            producer.stop.set()
            producer.join(10)
        broker.kill()
        if restarted is not None:
            restarted.stop()


def test_idempotent_retry_after_a_crash_is_answered_with_the_original_offset(
    tmp_path: Path,
) -> None:
    """A producer whose acknowledgement was lost in a crash retries the same batch
    (same producer id, epoch and sequence) against the restarted broker; Kafka
    rebuilds producer state from the log and does not append it again."""
    from ingest.protocol.records import build_batch
    from tests.integration.broker.rawkafka import RawClient

    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=BROKER_ENV).start()
    restarted: TidelakeProcess | None = None
    topic = "idempotent-restart"

    def produce(bootstrap: str, seq: int, value: bytes) -> tuple[int, int]:
        batch = build_batch(
            [(None, value, [], RECENT_TS)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )
        with RawClient(bootstrap) as c:
            resp = c.request(
                0,
                3,
                {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout": 10_000,
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}
                    ],
                },
            )
        [p] = resp.responses[0].partition_responses
        return int(p.error_code), int(p.base_offset)

    try:
        create_topic(broker.bootstrap, topic)
        with RawClient(broker.bootstrap) as c:
            init = c.request(22, 0, {"transactional_id": None, "transaction_timeout": 60_000})
        pid = int(init.producer_id)
        assert produce(broker.bootstrap, 0, b"first") == (0, 0)
        assert produce(broker.bootstrap, 1, b"second") == (0, 1)
        broker.kill()
        restarted = TidelakeProcess(data, env=BROKER_ENV, kafka_port=broker.kafka_port).start()
        # The retry of the last batch is a duplicate: its original offset, no new record.
        assert produce(restarted.bootstrap, 1, b"second") == (0, 1)
        assert produce(restarted.bootstrap, 2, b"third") == (0, 2)
        got = consume_range(restarted.bootstrap, topic, [0], 3)
        assert [m.value() for m in got] == [b"first", b"second", b"third"]
        c = Consumer(quiet({"bootstrap.servers": restarted.bootstrap, "group.id": "wm"}))
        try:
            assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 3)
        finally:
            c.close()
    finally:
        broker.kill()
        if restarted is not None:
            restarted.stop()
