"""Compacted topics with real clients on a real broker process: many updates
to few keys, the log cleaner running every 300 ms, and a consumer reading
from the start gets each key's latest value (nothing for a key whose
tombstone expired) at the offset the producer was told; across a broker
restart and while producing; the objects shrink."""

from __future__ import annotations

import datetime
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from ingest.protocol.codec import decode_response, encode_request
from ingest.protocol.records import BatchHeader, Compression, split_batches
from tests.integration.broker.conftest import BROKER_ENV, create_topic, quiet, unique
from tests.support.platform import TidelakeProcess

ENV = {
    **BROKER_ENV,
    "TIDELAKE_BROKER_LOG_CLEANER_BACKOFF_MS": "300",
    "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": "200",
}
COMPACT = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1500",
}
VALUE_PAD = b"x" * 200


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(tmp_path / "data", env=ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _objects_bytes(proc: TidelakeProcess) -> int:
    return sum(f.stat().st_size for f in (proc.data_dir / "objects").rglob("*") if f.is_file())


class Reference:
    """What a consumer from the start must see: key -> (offset, value) of its
    latest record, None for a tombstone."""

    def __init__(self) -> None:
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}
        self.lock = threading.Lock()

    def delivered(self, err: Any, msg: Any) -> None:
        assert err is None, err
        with self.lock:
            key = msg.key()
            old = self.latest.get(key)
            if old is None or old[0] < msg.offset():
                self.latest[key] = (msg.offset(), msg.value())

    def expected(self, *, tombstones: bool) -> dict[bytes, tuple[int, bytes | None]]:
        with self.lock:
            return {k: v for k, v in self.latest.items() if tombstones or v[1] is not None}


def _producer(bootstrap: str) -> Producer:
    return Producer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "lz4",  # cleaned batches are lz4 again
            }
        )
    )


def _produce_updates(
    p: Producer, topic: str, ref: Reference, rounds: int, keys: int, tag: str
) -> None:
    for r in range(rounds):
        for k in range(keys):
            p.produce(
                topic,
                key=b"key-%d" % k,
                value=b"%s-%d-" % (tag.encode(), r) + VALUE_PAD,
                on_delivery=ref.delivered,
            )
        p.poll(0)
    assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the start to the end of the partition (confluent-kafka)."""
    c = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("compact-reader"),
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
    )
    try:
        tp = TopicPartition(topic, 0, -2)
        end = c.get_watermark_offsets(tp, timeout=10)[1]  # the end when the read starts
        c.assign([tp])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consume error: {m.error()}")
                return out
            if m is not None:
                if m.offset() >= end:  # produced after the read started
                    return out
                out.append((m.offset(), m.key(), m.value()))
            if c.position([TopicPartition(topic, 0)])[0].offset >= end:
                return out
        raise AssertionError(
            f"not at offset {end} within 20 s: {c.position([TopicPartition(topic, 0)])}"
        )
    finally:
        c.close()


def _as_map(
    records: list[tuple[int, bytes, bytes | None]],
) -> dict[bytes, tuple[int, bytes | None]]:
    return {k: (o, v) for o, k, v in records}


def _wait_compacted(
    bootstrap: str, topic: str, ref: Reference, timeout: float = 30
) -> list[tuple[int, bytes, bytes | None]]:
    """Until a read from the start holds exactly one record per live key,
    the latest, and no tombstone (expired)."""
    want = ref.expected(tombstones=False)
    deadline = time.monotonic() + timeout
    got: list[tuple[int, bytes, bytes | None]] = []
    while time.monotonic() < deadline:
        got = _read_all(bootstrap, topic)
        if len(got) == len(want) and _as_map(got) == want:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not compacted: {len(got)} records, want {len(want)}")


def test_confluent_kafka_reads_the_latest_value_per_key_across_a_restart_and_while_producing(
    broker: TidelakeProcess,
) -> None:
    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, **COMPACT)
    ref = Reference()
    p = _producer(broker.bootstrap)
    _produce_updates(p, topic, ref, rounds=60, keys=20, tag="a")
    for k in (3, 7):  # deletes
        p.produce(topic, key=b"key-%d" % k, value=None, on_delivery=ref.delivered)
    assert p.flush(30) == 0
    produced = 60 * 20 * len(VALUE_PAD)  # the values alone; the cleaner runs meanwhile
    got = _wait_compacted(broker.bootstrap, topic, ref)
    assert b"key-3" not in _as_map(got) and b"key-7" not in _as_map(got)
    size_after = _objects_bytes(broker)
    assert size_after < produced / 20, (produced, size_after)

    # while producing: a reader always sees each key's latest value so far
    # (never an older one after a newer one), and the end state is compacted
    stop = threading.Event()

    def keep_producing() -> None:
        r = 0
        while not stop.is_set():
            _produce_updates(p, topic, ref, rounds=1, keys=20, tag=f"b{r}")
            r += 1
            time.sleep(0.02)

    t = threading.Thread(target=keep_producing, daemon=True)
    t.start()
    try:
        for _ in range(4):
            with ref.lock:
                before = dict(ref.latest)  # acknowledged before the read
            seen = _read_all(broker.bootstrap, topic)
            offsets = [o for o, _, _ in seen]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
            last_seen = _as_map(seen)
            after = ref.expected(tombstones=True)
            for k, (o, v) in before.items():
                if after[k][0] == o and v is not None:
                    # not updated meanwhile: the read ends with this value
                    assert last_seen[k] == (o, v), k
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(30)
    _wait_compacted(broker.bootstrap, topic, ref)

    # kill -9 while the cleaner works on a fresh burst of updates (every one
    # acknowledged), then a clean restart: no acknowledged latest value is
    # lost, and the view converges again
    _produce_updates(p, topic, ref, rounds=30, keys=20, tag="k")
    time.sleep(random.uniform(0.2, 0.5))
    broker.kill()
    broker.start()
    _wait_compacted(broker.bootstrap, topic, ref)
    broker.stop()
    broker.start()
    after_restart = _read_all(broker.bootstrap, topic)
    assert _as_map(after_restart) == ref.expected(tombstones=False)
    p2 = _producer(broker.bootstrap)
    _produce_updates(p2, topic, ref, rounds=10, keys=20, tag="c")
    _wait_compacted(broker.bootstrap, topic, ref)


def test_kafka_python_produces_and_reads_a_compacted_topic(broker: TidelakeProcess) -> None:
    topic = unique("compacted-kp")
    create_topic(broker.bootstrap, topic, **COMPACT)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, compression_type="gzip"
    )
    reference: dict[bytes, tuple[int, bytes | None]] = {}
    try:
        futures = []
        for r in range(50):
            for k in range(10):
                key = b"k%d" % k
                value = None if (r == 49 and k == 0) else b"v%d-" % r + VALUE_PAD
                futures.append((key, value, producer.send(topic, key=key, value=value)))
        producer.flush(30)
        for key, value, fut in futures:
            md = fut.get(30)
            reference[key] = (md.offset, value)
        # a record without a key is refused
        with pytest.raises(Exception, match="(?i)invalid.?record|InvalidRecord"):
            producer.send(topic, key=None, value=b"no key").get(30)
    finally:
        producer.close()
    want = {k: v for k, v in reference.items() if v[1] is not None}
    deadline = time.monotonic() + 30
    got: dict[bytes, tuple[int, bytes | None]] = {}
    count = -1
    while time.monotonic() < deadline:
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            consumer_timeout_ms=2000,
        )
        try:
            tp = KpTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            records = []
            while consumer.position(tp) < end:
                batch = consumer.poll(timeout_ms=1000)
                for msgs in batch.values():
                    records.extend(msgs)
                if not batch:
                    break
        finally:
            consumer.close()
        got = {m.key: (m.offset, m.value) for m in records}
        count = len(records)
        if count == len(want) and got == want:
            break
        time.sleep(0.3)
    assert got == want and count == len(want), (count, len(want))


def _stored_batches(bootstrap: str, topic: str) -> list[BatchHeader]:
    """The record batch headers of partition 0 as the broker stores them: one
    raw Fetch v4 (a client library would hide each batch's codec)."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i32Timedelta, i64

    request = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
        min_bytes=i32(1),
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(
                        partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 24)
                    ),
                ),
            ),
        ),
    )
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(encode_request(1, 4, 7, "batch-reader", request))
        reader = s.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        _, response = decode_response(1, 4, reader.read(size))
    records = response.responses[0].partitions[0].records
    return split_batches(memoryview(bytearray(records)), verify_crc=True)


def test_snappy_batches_the_cleaner_rebuilds_stay_snappy_and_librdkafka_reads_them(
    broker: TidelakeProcess,
) -> None:
    topic = unique("compacted-snappy")
    create_topic(broker.bootstrap, topic, **COMPACT)
    ref = Reference()
    p = Producer(
        quiet(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 50,
                "compression.type": "snappy",
            }
        )
    )
    # the last round rewrites half the keys: the round before it keeps the
    # other half, so its batches are rebuilt, not kept byte for byte
    _produce_updates(p, topic, ref, rounds=10, keys=20, tag="a")
    _produce_updates(p, topic, ref, rounds=1, keys=10, tag="b")
    got = _wait_compacted(broker.bootstrap, topic, ref)  # librdkafka decodes them
    assert {k for _, k, _ in got} == {b"key-%d" % k for k in range(20)}
    batches = _stored_batches(broker.bootstrap, topic)
    rebuilt = [b for b in batches if b.records_count < b.last_offset_delta + 1]
    assert rebuilt, [(b.base_offset, b.records_count, b.last_offset_delta) for b in batches]
    assert {b.compression for b in rebuilt} == {Compression.SNAPPY}
