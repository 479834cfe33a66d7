"""A partition keeps its open transaction across a kill -9: after the restart
a read_committed consumer still stops at the transaction's first offset, and
the abort that the next producer of the transactional id causes drops exactly
the transaction's records (the partition rebuilt its transaction state)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from tests.integration.broker.conftest import (
    BROKER_ENV,
    consume_range,
    create_topic,
    quiet,
    unique,
)
from tests.support.platform import TidelakeProcess


def _values(
    bootstrap: str, topic: str, count: int, timeout: float = 10, **conf: str
) -> list[bytes | None]:
    """Up to ``count`` values from the start (waiting ``timeout`` s for more)."""
    got = consume_range(bootstrap, topic, [0], count, timeout=timeout, **conf)
    return [m.value() for m in got]


def _stable_end(bootstrap: str, topic: str) -> int:
    """The end a read_committed consumer is told (ListOffsets, isolation level 1)."""
    c = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("wm"),
                "isolation.level": "read_committed",
            }
        )
    )
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def _kafka_python_committed(bootstrap: str, topic: str) -> list[bytes]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    try:
        tp = KafkaTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        return [m.value for m in c]
    finally:
        c.close()


def test_an_open_transaction_survives_a_kill_and_its_abort_drops_exactly_its_records(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=BROKER_ENV).start()
    restarted: TidelakeProcess | None = None
    topic = unique("txn-restart")
    txn_id = unique("tx")
    try:
        create_topic(broker.bootstrap, topic)
        conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id}
        p = Producer(quiet(conf))
        p.init_transactions(30)
        p.begin_transaction()
        for v in (b"c0", b"c1", b"c2"):
            p.produce(topic, v, partition=0)
        p.commit_transaction(30)  # offsets 0-2, marker 3
        p.begin_transaction()
        for v in (b"x0", b"x1", b"x2"):
            p.produce(topic, v, partition=0)
        assert p.flush(30) == 0  # offsets 4-6, acknowledged, never committed
        plain = Producer(quiet({"bootstrap.servers": broker.bootstrap}))
        for v in (b"p0", b"p1"):
            plain.produce(topic, v, partition=0)
        assert plain.flush(30) == 0  # offsets 7-8
        assert _stable_end(broker.bootstrap, topic) == 4

        broker.kill()
        restarted = TidelakeProcess(data, env=BROKER_ENV, kafka_port=broker.kafka_port).start()
        bootstrap = restarted.bootstrap
        assert _stable_end(bootstrap, topic) == 4  # the open transaction holds the LSO
        everything = [b"c0", b"c1", b"c2", b"x0", b"x1", b"x2", b"p0", b"p1"]
        assert _values(bootstrap, topic, 8, **{"isolation.level": "read_uncommitted"}) == everything
        committed_so_far = _values(bootstrap, topic, 4, 3, **{"isolation.level": "read_committed"})
        assert committed_so_far == [b"c0", b"c1", b"c2"]

        # the next producer of the id fences the old one: its open transaction is aborted
        successor = Producer(quiet({"bootstrap.servers": bootstrap, "transactional.id": txn_id}))
        successor.init_transactions(30)
        expected = [b"c0", b"c1", b"c2", b"p0", b"p1"]
        assert _values(bootstrap, topic, 6, 3, **{"isolation.level": "read_committed"}) == expected
        assert _kafka_python_committed(bootstrap, topic) == expected
        assert _stable_end(bootstrap, topic) == 10  # the high watermark: nothing open
    finally:
        broker.kill()
        if restarted is not None:
            restarted.stop()
