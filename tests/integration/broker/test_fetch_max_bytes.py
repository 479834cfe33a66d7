"""Fetch honours max_bytes and partition_max_bytes as Kafka does (KIP-74):
only the first record batch of the first non-empty partition may exceed them,
so that a consumer always makes progress; every later partition gets only
whole batches that fit what is left of the budget."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.serial import entity_reader

from ingest.protocol.codec import response_class
from tests.integration.broker.conftest import consume_range, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

FETCH = 1
MESSAGE = 900 * 1024
PARTITIONS = 3
PER_PARTITION = 3
# The response header and the per-topic and per-partition fields around the
# records: generous, but far below one more 900 KiB batch.
OVERHEAD = 4096


@pytest.fixture(scope="module")
def big_topic(tidelake: TidelakeProcess) -> str:
    """A topic with three ~900 KiB messages, one batch each, on each of three partitions."""
    topic = unique("big")
    create_topic(tidelake.bootstrap, topic, partitions=PARTITIONS)
    p = Producer(
        quiet(
            {
                "bootstrap.servers": tidelake.bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "batch.num.messages": 1,
                "compression.type": "none",
            }
        )
    )
    failures: list[Any] = []
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(
                topic,
                value=bytes([65 + part]) * MESSAGE,
                key=b"%d-%d" % (part, i),
                partition=part,
                on_delivery=lambda err, _m: failures.append(err) if err else None,
            )
            p.poll(0)
    assert p.flush(60) == 0 and not failures, failures
    return topic


def _fetch(
    tidelake: TidelakeProcess, topic: str, max_bytes: int, partition_max_bytes: int
) -> tuple[int, Any]:
    request = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": partition_max_bytes}
                    for p in range(PARTITIONS)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    with RawClient(tidelake.bootstrap, timeout=30) as c:
        c.send_frame(c.encode(FETCH, 12, request))
        frame = c.recv_frame()
    result = entity_reader(response_class(FETCH, 12))(memoryview(frame), 5)
    entity = result[0] if isinstance(result, tuple) else result
    return len(frame), entity


def _batches(records: bytes | None) -> list[int]:
    """The sizes of the whole record batches in ``records``."""
    sizes = []
    pos = 0
    data = records or b""
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        assert end <= len(data), "a partial batch in the response"
        sizes.append(end - pos)
        pos = end
    return sizes


def test_later_partitions_get_only_what_fits_the_remaining_max_bytes(
    tidelake: TidelakeProcess, big_topic: str
) -> None:
    size, resp = _fetch(tidelake, big_topic, max_bytes=1_000_000, partition_max_bytes=1 << 20)
    assert size <= 1_000_000 + OVERHEAD
    per_partition = [_batches(p.records) for p in resp.responses[0].partitions]
    assert [len(b) for b in per_partition] == [1, 0, 0]


def test_the_first_batch_alone_may_exceed_max_bytes(
    tidelake: TidelakeProcess, big_topic: str
) -> None:
    size, resp = _fetch(tidelake, big_topic, max_bytes=500_000, partition_max_bytes=1 << 20)
    per_partition = [_batches(p.records) for p in resp.responses[0].partitions]
    assert [len(b) for b in per_partition] == [1, 0, 0]
    assert size <= per_partition[0][0] + OVERHEAD


def test_partition_max_bytes_holds_for_every_partition_but_the_first(
    tidelake: TidelakeProcess, big_topic: str
) -> None:
    size, resp = _fetch(tidelake, big_topic, max_bytes=50_000_000, partition_max_bytes=500_000)
    per_partition = [_batches(p.records) for p in resp.responses[0].partitions]
    assert [len(b) for b in per_partition] == [1, 0, 0]
    assert size <= per_partition[0][0] + OVERHEAD


def test_a_large_budget_takes_whole_batches_from_every_partition(
    tidelake: TidelakeProcess, big_topic: str
) -> None:
    _size, resp = _fetch(tidelake, big_topic, max_bytes=50_000_000, partition_max_bytes=2_000_000)
    per_partition = [_batches(p.records) for p in resp.responses[0].partitions]
    assert [len(b) for b in per_partition] == [2, 2, 2]


def test_confluent_consumer_with_fetch_max_bytes_reads_every_large_message(
    tidelake: TidelakeProcess, big_topic: str
) -> None:
    got = consume_range(
        tidelake.bootstrap,
        big_topic,
        range(PARTITIONS),
        PARTITIONS * PER_PARTITION,
        timeout=60,
        **{
            "fetch.max.bytes": 1_000_000,
            # librdkafka's smallest allowed value: a larger response drops the connection
            "receive.message.max.bytes": 1_000_512,
        },
    )
    assert len(got) == PARTITIONS * PER_PARTITION
    for part in range(PARTITIONS):
        values = [m.value() for m in got if m.partition() == part]
        assert values == [bytes([65 + part]) * MESSAGE] * PER_PARTITION
