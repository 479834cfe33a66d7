"""Fetch and ListOffsets honour the isolation level over a partition with
transactions (markers written directly through the partition log)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import PartitionData
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.broker import Broker
from ingest.config import BrokerConfig
from ingest.handlers import fetch, list_offsets
from ingest.handlers.base import RequestContext
from ingest.log.partition import PartitionLog
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch, split_batches
from ingest.s3stream import MemoryStreamEngine

_TOPIC = "tx"


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(
        BrokerConfig(port=0, fetch_max_wait_cap_ms=50), MemoryMetadataStore(), MemoryStreamEngine()
    )
    await b.engine.start()
    await b.logs.load()
    await b.logs.create_topic(_TOPIC, 1, 1, {})
    try:
        yield b
    finally:
        await b.engine.close()


def _ctx(broker: Broker, api_key: int, version: int) -> RequestContext:
    return RequestContext(broker, api_key, version, 1, "test", "127.0.0.1")


async def _append(log: PartitionLog, data: bytes) -> int:
    out = log.append(data)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable
    return out.base_offset


async def _marker(log: PartitionLog, pid: int, commit: bool) -> None:
    out = log.write_marker(pid, 0, commit, 0)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable


def _batch(pid: int, seq: int, ts: int, transactional: bool = True) -> bytes:
    return build_batch(
        [(None, b"x", [], ts), (None, b"y", [], ts + 1)],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
        attributes=0x10 if transactional else 0,
    )


async def _fetch(
    broker: Broker, offset: int, isolation: int, max_bytes: int = 1 << 20
) -> PartitionData:
    request = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        isolation_level=i8(isolation),
        topics=(
            FetchTopic(
                topic=TopicName(_TOPIC),
                partitions=(
                    FetchPartition(
                        partition=i32(0),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(max_bytes),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    response = await fetch.handle(_ctx(broker, 1, 12), request)
    (part,) = response.responses[0].partitions
    return part


async def _list(broker: Broker, timestamp: int, isolation: int) -> tuple[int, int]:
    request = ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(isolation),
        topics=(
            ListOffsetsTopic(
                name=TopicName(_TOPIC),
                partitions=(
                    ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),
                ),
            ),
        ),
    )
    response = await list_offsets.handle(_ctx(broker, 2, 8), request)
    (part,) = response.topics[0].partitions
    assert part.error_code == ErrorCode.none
    return int(part.offset), int(part.timestamp)


def _bases(part: PartitionData) -> list[int]:
    return (
        [h.base_offset for h in split_batches(memoryview(bytes(part.records)))]
        if part.records
        else []
    )


async def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(
    broker: Broker,
) -> None:
    log = broker.logs.partition(_TOPIC, 0)
    assert log is not None
    await _append(log, _batch(-1, -1, 100, transactional=False))  # 0-1
    await _append(log, _batch(1, 0, 200))  # 2-3, aborted below
    await _append(log, _batch(2, 0, 300))  # 4-5, open
    await _marker(log, 1, commit=False)  # 6

    committed = await _fetch(broker, 0, 1)
    assert committed.error_code == ErrorCode.none
    assert (committed.high_watermark, committed.last_stable_offset) == (7, 4)
    assert _bases(committed) == [0, 2]
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions or ()] == [
        (1, 2)
    ]

    uncommitted = await _fetch(broker, 0, 0)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (7, 4)
    assert _bases(uncommitted) == [0, 2, 4, 6]
    assert uncommitted.aborted_transactions is None

    nothing_yet = await _fetch(broker, 4, 1)  # at the LSO: no records until producer 2 ends
    assert _bases(nothing_yet) == [] and nothing_yet.aborted_transactions == ()

    await _marker(log, 2, commit=True)  # 7
    after = await _fetch(broker, 4, 1)
    assert after.last_stable_offset == after.high_watermark == 8
    assert _bases(after) == [4, 6, 7]
    assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions or ()] == [(1, 2)]


async def test_list_offsets_read_committed_never_points_past_the_lso(broker: Broker) -> None:
    log = broker.logs.partition(_TOPIC, 0)
    assert log is not None
    await _append(log, _batch(-1, -1, 100, transactional=False))  # 0-1 at 100, 101
    await _append(log, _batch(1, 0, 200))  # 2-3 at 200, 201: open
    assert await _list(broker, -1, 0) == (4, -1)
    assert await _list(broker, -1, 1) == (2, -1)  # LATEST is the LSO
    assert await _list(broker, 150, 0) == (2, 200)
    assert await _list(broker, 150, 1) == (-1, -1)  # found past the LSO: nothing
    assert await _list(broker, 100, 1) == (0, 100)
    assert await _list(broker, -3, 1) == (-1, -1)  # max timestamp is in the open transaction
    assert await _list(broker, -2, 1) == (0, -1)
    await _marker(log, 1, commit=True)
    assert await _list(broker, -1, 1) == (5, -1)
    assert await _list(broker, 150, 1) == (2, 200)


async def test_the_aborted_list_names_only_transactions_that_meet_the_records_returned(
    broker: Broker,
) -> None:
    log = broker.logs.partition(_TOPIC, 0)
    assert log is not None
    first = _batch(-1, -1, 100, transactional=False)
    await _append(log, first)  # 0-1
    await _append(log, _batch(1, 0, 200))  # 2-3
    await _marker(log, 1, commit=False)  # 4
    only_first = await _fetch(broker, 0, 1, max_bytes=len(first))
    assert _bases(only_first) == [0]
    assert only_first.aborted_transactions == ()  # producer 1's [2, 4] is not in [0, 2)
    everything = await _fetch(broker, 0, 1)
    assert [(a.producer_id, a.first_offset) for a in everything.aborted_transactions or ()] == [
        (1, 2)
    ]
