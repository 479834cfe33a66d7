"""confluent-kafka producers and consumers against one broker: codecs, acks,
idempotence and offsets by time."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.integration.broker.conftest import (
    RECENT_TS,
    admin,
    consume_range,
    create_topic,
    quiet,
    unique,
    wait_all,
)
from tests.support.platform import TidelakeProcess

BASE_TS = RECENT_TS


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> list[Any]:
    """Produce and flush; returns the delivery reports (error, partition, offset)."""
    reports: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        reports.append((err, msg.partition(), msg.offset(), msg.value()))

    p = Producer(quiet({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf}))
    for r in records:
        p.produce(topic, on_delivery=on_delivery, **r)
    assert p.flush(30) == 0
    return reports


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_keys_headers_and_timestamps(
    tidelake: TidelakeProcess, codec: str
) -> None:
    topic = unique(f"codec-{codec}")
    create_topic(tidelake.bootstrap, topic)
    sent = []
    for i in range(300):
        sent.append(
            {
                "key": None if i % 7 == 0 else f"key-{i}".encode(),
                "value": None if i % 11 == 5 else (f"value-{i}-" * (i % 13 + 1)).encode(),
                "headers": [("h1", f"a{i}".encode()), ("empty", b""), ("nil", None)][: i % 4],
                "timestamp": BASE_TS + i * 17 - (i % 5) * 3,
                "partition": 0,
            }
        )
    reports = _produce(tidelake.bootstrap, topic, sent, **{"compression.type": codec})
    assert [r[0] for r in reports] == [None] * len(sent)
    assert [r[2] for r in reports] == list(range(len(sent)))

    got = consume_range(tidelake.bootstrap, topic, [0], len(sent))
    assert len(got) == len(sent)
    assert [m.offset() for m in got] == list(range(len(sent)))
    for m, s in zip(got, sent, strict=True):
        assert m.key() == s["key"]
        assert m.value() == s["value"]
        assert (m.headers() or []) == s["headers"]
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, s["timestamp"])


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_delivers_every_record_in_order(
    tidelake: TidelakeProcess, acks: str
) -> None:
    topic = unique(f"acks-{acks}")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    sent = [{"value": f"m{i}".encode(), "partition": i % 2} for i in range(200)]
    reports = _produce(tidelake.bootstrap, topic, sent, acks=acks)
    assert [r[0] for r in reports] == [None] * len(sent)
    got = consume_range(tidelake.bootstrap, topic, [0, 1], len(sent))
    for part in (0, 1):
        values = [m.value() for m in got if m.partition() == part]
        assert values == [s["value"] for s in sent if s["partition"] == part]
        offsets = [m.offset() for m in got if m.partition() == part]
        assert offsets == list(range(len(offsets)))
    if acks != "0":
        for _err, part, offset, value in reports:
            assert offset >= 0
            assert got_at(got, part, offset) == value


def got_at(got: list[Any], partition: int, offset: int) -> bytes:
    return next(m.value() for m in got if m.partition() == partition and m.offset() == offset)


def test_idempotent_producer_delivers_exactly_once_in_order(tidelake: TidelakeProcess) -> None:
    topic = unique("idempotent")
    create_topic(tidelake.bootstrap, topic, partitions=3)
    n = 3000
    sent = [
        {"key": f"k{i % 3}".encode(), "value": str(i).encode(), "partition": i % 3}
        for i in range(n)
    ]
    reports = _produce(
        tidelake.bootstrap,
        topic,
        sent,
        **{
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": 5,
            "batch.size": 2000,
        },
    )
    assert all(r[0] is None for r in reports)
    got = consume_range(tidelake.bootstrap, topic, [0, 1, 2], n)
    assert len(got) == n
    for part in range(3):
        values = [int(m.value()) for m in got if m.partition() == part]
        assert values == list(range(part, n, 3))
        assert [m.offset() for m in got if m.partition() == part] == list(range(len(values)))


def test_offsets_for_times_returns_earliest_offset_at_or_after_target(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("by-time")
    create_topic(tidelake.bootstrap, topic)
    # Timestamps are not monotonic, and span several batches.
    stamps = [1000, 3000, 2000, 4000, 4000, 6000, 5000, 8000]
    for chunk in (stamps[:3], stamps[3:5], stamps[5:]):
        _produce(
            tidelake.bootstrap,
            topic,
            [
                {"value": str(ts).encode(), "timestamp": BASE_TS + ts, "partition": 0}
                for ts in chunk
            ],
        )
    c = Consumer(quiet({"bootstrap.servers": tidelake.bootstrap, "group.id": unique("times")}))
    try:

        def lookup(ts: int) -> int:
            [res] = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + ts)], timeout=10)
            assert res.error is None
            return res.offset

        expected = {
            0: 0,
            1000: 0,
            1001: 1,  # 3000 at offset 1 comes before 2000 at offset 2
            2000: 1,
            3000: 1,
            3001: 3,
            4000: 3,
            4500: 5,
            5000: 5,
            6000: 5,
            6001: 7,
            8000: 7,
        }
        assert {ts: lookup(ts) for ts in expected} == expected
        # No record at or after the target: Kafka answers offset -1 (the end).
        assert lookup(8001) == OFFSET_END
        assert lookup(10**9) == OFFSET_END
        # Earliest (-2) and latest (-1) keep their special meaning.
        [low] = c.offsets_for_times([TopicPartition(topic, 0, -2)], timeout=10)
        [high] = c.offsets_for_times([TopicPartition(topic, 0, -1)], timeout=10)
        assert (low.offset, high.offset) == (0, len(stamps))
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (lo, hi) == (0, len(stamps))
    finally:
        c.close()


def test_offsets_for_times_on_an_empty_partition_returns_the_end(tidelake: TidelakeProcess) -> None:
    topic = unique("by-time-empty")
    create_topic(tidelake.bootstrap, topic)
    c = Consumer(quiet({"bootstrap.servers": tidelake.bootstrap, "group.id": unique("times")}))
    try:
        [res] = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS)], timeout=10)
        assert res.error is None
        assert res.offset == OFFSET_END
    finally:
        c.close()


def test_producing_to_an_unknown_partition_fails_delivery(tidelake: TidelakeProcess) -> None:
    topic = unique("one-partition")
    create_topic(tidelake.bootstrap, topic)
    p = Producer(quiet({"bootstrap.servers": tidelake.bootstrap, "message.timeout.ms": 3000}))
    errors: list[Any] = []
    try:
        p.produce(topic, value=b"x", partition=5, on_delivery=lambda e, m: errors.append(e))
    except KafkaException as exc:
        errors.append(exc.args[0])
    p.flush(10)
    assert len(errors) == 1 and errors[0] is not None


@pytest.mark.parametrize("start", [0, 1000])
def test_fetch_out_of_range_resets_to_the_log_start(tidelake: TidelakeProcess, start: int) -> None:
    """Below the low watermark (after DeleteRecords) or past the end, the fetch
    answers OFFSET_OUT_OF_RANGE and the consumer resets (auto.offset.reset)."""
    topic = unique("out-of-range")
    create_topic(tidelake.bootstrap, topic)
    _produce(tidelake.bootstrap, topic, [{"value": b"%d" % i, "partition": 0} for i in range(6)])
    client = admin(tidelake.bootstrap)
    [(_, deleted)] = wait_all(client.delete_records([TopicPartition(topic, 0, 2)])).items()
    assert deleted.low_watermark == 2
    got = consume_range(tidelake.bootstrap, topic, [0], 4, timeout=15, start=start)
    assert [(m.offset(), m.value()) for m in got] == [(i, b"%d" % i) for i in range(2, 6)]


def test_a_transaction_timeout_above_the_brokers_maximum_fails_fast(
    tidelake: TidelakeProcess,
) -> None:
    """A producer asking for a longer transaction timeout than the broker
    allows (transaction.max.timeout.ms, 15 minutes) hears so at once, with
    Kafka's INVALID_TRANSACTION_TIMEOUT, not after retrying."""
    p = Producer(
        quiet(
            {
                "bootstrap.servers": tidelake.bootstrap,
                "transactional.id": unique("tx"),
                "transaction.timeout.ms": 1_000_000,
            }
        )
    )
    started = time.monotonic()
    with pytest.raises(KafkaException) as exc:
        p.init_transactions(15)
    assert time.monotonic() - started < 5
    assert exc.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
