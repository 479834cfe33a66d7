"""Produce hardening: one bad batch answers an error for its partition and
nothing else; the broker keeps serving every other partition and client.

Raw frames are built by hand so that header fields a real client would never
send (inflated offset deltas, decompression bombs) reach the broker.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

import crc32c
import pytest
import zstandard
from confluent_kafka import Consumer, Producer, TopicPartition

from ingest.protocol.records import Compression, build_batch, write_varint
from tests.integration.broker.conftest import RECENT_TS, consume_range, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87

_MIB = 1024 * 1024


def _produce_request(
    topic: str, records: bytes, partition: int = 0, acks: int = -1, timeout_ms: int = 10_000
) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": timeout_ms,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def _produce_raw(bootstrap: str, topic: str, records: bytes, partition: int = 0) -> Any:
    with RawClient(bootstrap, timeout=30) as c:
        resp = c.request(0, 3, _produce_request(topic, records, partition))
    [t] = resp.responses
    [p] = t.partition_responses
    return p


def _with_header(batch: bytes, **fields: int) -> bytes:
    """``batch`` with header fields replaced, CRC recomputed (so only the field is wrong)."""
    out = bytearray(batch)
    offsets = {"last_offset_delta": (23, ">i"), "records_count": (57, ">i")}
    for name, value in fields.items():
        pos, fmt = offsets[name]
        struct.pack_into(fmt, out, pos, value)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _one_record() -> bytes:
    return build_batch([(b"k", b"v", [], RECENT_TS)])


def _high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": unique("hw")}))
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        c.close()


def _produce_ok(bootstrap: str, topic: str, value: bytes, timeout: float = 15) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap, "acks": "all"}))
    errors: list[Any] = []
    p.produce(topic, value=value, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(timeout) == 0, "produce did not complete"
    assert not errors, errors


# --- item 1 and 2: record counts ---------------------------------------------------------


def test_an_offset_delta_overflowing_the_count_is_rejected_and_every_topic_keeps_working(
    tidelake: TidelakeProcess,
) -> None:
    topic, other = unique("overflow"), unique("other")
    create_topic(tidelake.bootstrap, topic)
    create_topic(tidelake.bootstrap, other)
    bad = _with_header(_one_record(), last_offset_delta=0x7FFFFFFF)
    p = _produce_raw(tidelake.bootstrap, topic, bad)
    assert int(p.error_code) == INVALID_RECORD
    assert int(p.base_offset) == -1
    # the same partition, another topic and another client are all served
    good = _produce_raw(tidelake.bootstrap, topic, _one_record())
    assert (int(good.error_code), int(good.base_offset)) == (NONE, 0)
    _produce_ok(tidelake.bootstrap, other, b"after")
    [m] = consume_range(tidelake.bootstrap, other, [0], 1)
    assert m.value() == b"after"


def test_an_inflated_offset_delta_is_rejected_and_the_high_watermark_does_not_move(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("inflated")
    create_topic(tidelake.bootstrap, topic)
    assert int(_produce_raw(tidelake.bootstrap, topic, _one_record()).error_code) == NONE
    bad = _with_header(_one_record(), last_offset_delta=1_000_000)
    p = _produce_raw(tidelake.bootstrap, topic, bad)
    assert int(p.error_code) == INVALID_RECORD
    assert _high_watermark(tidelake.bootstrap, topic) == 1
    good = _produce_raw(tidelake.bootstrap, topic, _one_record())
    assert (int(good.error_code), int(good.base_offset)) == (NONE, 1)
    assert _high_watermark(tidelake.bootstrap, topic) == 2


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"records_count": 2}, INVALID_RECORD),  # header says 2, the batch holds 1
        ({"last_offset_delta": 1, "records_count": 2}, INVALID_RECORD),
        ({"records_count": 0}, INVALID_RECORD),
        ({"last_offset_delta": -1}, INVALID_RECORD),
    ],
    ids=["count-above-records", "delta-and-count-above-records", "zero-count", "negative-delta"],
)
def test_a_batch_whose_counts_disagree_with_its_records_is_rejected(
    tidelake: TidelakeProcess, fields: dict[str, int], code: int
) -> None:
    topic = unique("counts")
    create_topic(tidelake.bootstrap, topic)
    p = _produce_raw(tidelake.bootstrap, topic, _with_header(_one_record(), **fields))
    assert int(p.error_code) == code
    assert _high_watermark(tidelake.bootstrap, topic) == 0


def test_a_bad_partition_does_not_fail_the_others_of_the_request(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("mixed")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    bad = _with_header(_one_record(), last_offset_delta=0x7FFFFFFF)
    request = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [
                    {"index": 0, "records": bad},
                    {"index": 1, "records": _one_record()},
                ],
            }
        ],
    }
    with RawClient(tidelake.bootstrap) as c:
        resp = c.request(0, 7, request)
    [t] = resp.responses
    codes = {int(p.index): int(p.error_code) for p in t.partition_responses}
    assert codes == {0: INVALID_RECORD, 1: NONE}


# --- item 3: decompression bombs ---------------------------------------------------------


def _zstd_bomb(records: int, value_bytes: int) -> bytes:
    """A zstd batch of ``records`` records of ``value_bytes`` zero bytes each."""
    value = bytes(value_bytes)
    cctx = zstandard.ZstdCompressor(level=3)
    chunks = cctx.compressobj()
    out = bytearray()
    for i in range(records):
        rec = b"\0" + write_varint(0) + write_varint(i) + write_varint(-1)
        rec += write_varint(value_bytes) + value + write_varint(0)
        out += chunks.compress(write_varint(len(rec)) + rec)
    out += chunks.flush()
    header = bytearray(_one_record()[:61])
    struct.pack_into(">i", header, 8, 61 - 12 + len(out))
    struct.pack_into(">h", header, 21, Compression.ZSTD)
    struct.pack_into(">i", header, 23, records - 1)
    struct.pack_into(">i", header, 57, records)
    batch = header + out
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_a_decompression_bomb_is_rejected_while_other_clients_stay_served(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("bomb")
    create_topic(tidelake.bootstrap, topic, **{"max.message.bytes": str(_MIB)})
    bomb = _zstd_bomb(256, _MIB)  # inflates to 256 MiB
    assert len(bomb) < 64 * 1024
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with RawClient(tidelake.bootstrap) as c:
            while not done.is_set():
                t0 = time.monotonic()
                c.request(3, 1, {"topics": None})
                latencies.append(time.monotonic() - t0)
                time.sleep(0.005)

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(0.2)
    try:
        results: list[int] = []

        def bomb_one() -> None:
            results.append(int(_produce_raw(tidelake.bootstrap, topic, bomb).error_code))

        bombers = [threading.Thread(target=bomb_one) for _ in range(3)]
        for b in bombers:
            b.start()
        for b in bombers:
            b.join(60)
        time.sleep(0.2)
    finally:
        done.set()
        prober.join(10)
    assert results == [MESSAGE_TOO_LARGE] * 3
    assert _high_watermark(tidelake.bootstrap, topic) == 0
    assert latencies and max(latencies) < 0.25, sorted(latencies)[-5:]
    # a modest compressed batch to the same topic is accepted
    ok = _zstd_bomb(4, 64 * 1024)
    assert int(_produce_raw(tidelake.bootstrap, topic, ok).error_code) == NONE


# --- item 6: a retried idempotent produce after a disconnect ----------------------------


def test_an_idempotent_produce_retried_after_a_disconnect_gets_its_original_offset(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("retry")
    create_topic(tidelake.bootstrap, topic)
    with RawClient(tidelake.bootstrap) as c:
        pid = int(
            c.request(22, 0, {"transactional_id": None, "transaction_timeout": 60_000}).producer_id
        )
    for seq in range(10):
        batch = build_batch(
            [(b"k", b"v%d" % seq, [], RECENT_TS)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )
        # send and reset the connection at once: the handler is cancelled
        # while it waits for durability
        c = RawClient(tidelake.bootstrap)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.send_frame(c.encode(0, 3, _produce_request(topic, batch)))
        c.close()
        p = _produce_raw(tidelake.bootstrap, topic, batch)
        assert (int(p.error_code), int(p.base_offset)) == (NONE, seq)
    got = consume_range(tidelake.bootstrap, topic, [0], 10)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(10)]
