"""A broker reading a partition another broker leads, from object storage:
what the leader uploaded and nothing more, in order, with Kafka's errors; a
read_committed read never hands out transactional or control batches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ingest.log.manager import LogManager
from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch, build_control_batch, split_batches
from ingest.replica import ReplicaReader
from ingest.replica.reader import committed_prefix
from ingest.s3stream import open_engine
from ingest.s3stream.engine import S3StreamEngine
from ingest.s3stream.objectstore import MemoryObjectStore
from tests.unit.s3stream.nodes import MIB, node_config


@dataclass
class Pair:
    leader: LogManager
    leader_engine: S3StreamEngine
    log: PartitionLog
    reader: ReplicaReader
    reader_logs: LogManager


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    meta, objects = MemoryMetadataStore(), MemoryObjectStore()
    a = open_engine(node_config(tmp_path, 1), meta, objects)
    b = open_engine(node_config(tmp_path, 2), meta, objects)
    await a.start()
    await b.start()
    try:
        leader = LogManager(meta, a, TopicConfigRegistry.default(), lazy=True)
        await leader.load()
        await leader.create_topic("t", 2, 1, {})
        log = await leader.open_partition("t", 0, 1)
        other = LogManager(meta, b, TopicConfigRegistry.default(), lazy=True)
        await other.load()
        reader = ReplicaReader(b, other, refresh_s=0)
        yield Pair(leader, a, log, reader, other)
    finally:
        await a.close()
        await b.close()


async def _append(log: PartitionLog, data: bytes) -> int:
    out = log.append(data)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable
    return out.base_offset


def _values(records: bytes) -> list[int]:
    return [h.base_offset for h in split_batches(memoryview(records), verify_crc=False)]


def _batch(n: int, *, txn_pid: int = -1, seq: int = 0) -> bytes:
    rows = [(None, b"v%d" % i, [], 1000 + i) for i in range(n)]
    if txn_pid < 0:
        return build_batch(rows)
    return build_batch(
        rows, producer_id=txn_pid, producer_epoch=0, base_sequence=seq, attributes=0x10
    )


async def test_a_replica_reads_only_what_the_leader_uploaded(pair: Pair) -> None:
    for _ in range(3):
        await _append(pair.log, _batch(2))
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert (res.error, res.high_watermark, res.records) == (ErrorCode.none, 0, b"")
    await pair.leader_engine.flush()
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.none and res.high_watermark == 6
    assert _values(res.records) == [0, 2, 4]
    res = await pair.reader.read("t", 0, 4, MIB, read_committed=False)
    assert _values(res.records) == [4]
    # more appends show up after the next upload only
    await _append(pair.log, _batch(1))
    res = await pair.reader.read("t", 0, 6, MIB, read_committed=False)
    assert (res.error, res.records, res.high_watermark) == (ErrorCode.none, b"", 6)
    await pair.leader_engine.flush()
    res = await pair.reader.read("t", 0, 6, MIB, read_committed=False)
    assert _values(res.records) == [6] and res.high_watermark == 7


async def test_an_offset_past_the_uploaded_end_reads_nothing_without_error(pair: Pair) -> None:
    await _append(pair.log, _batch(2))
    await pair.leader_engine.flush()
    res = await pair.reader.read("t", 0, 50, MIB, read_committed=False)
    assert (res.error, res.records, res.high_watermark) == (ErrorCode.none, b"", 2)


async def test_an_offset_below_the_log_start_is_out_of_range(pair: Pair) -> None:
    for _ in range(4):
        await _append(pair.log, _batch(2))
    await pair.leader_engine.flush()
    assert _values((await pair.reader.read("t", 0, 0, MIB, read_committed=False)).records)
    await pair.log.delete_records(4)
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.offset_out_of_range
    assert (res.log_start_offset, res.high_watermark) == (4, 8)
    res = await pair.reader.read("t", 0, 4, MIB, read_committed=False)
    assert res.error == ErrorCode.none and _values(res.records) == [4, 6]


async def test_max_bytes_returns_at_least_one_batch(pair: Pair) -> None:
    for _ in range(3):
        await _append(pair.log, _batch(2))
    await pair.leader_engine.flush()
    res = await pair.reader.read("t", 0, 0, 1, read_committed=False)
    assert _values(res.records)[0] == 0


async def test_unknown_and_deleted_topics_are_unknown(pair: Pair) -> None:
    res = await pair.reader.read("nope", 0, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.unknown_topic_or_partition
    res = await pair.reader.read("t", 2, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.unknown_topic_or_partition
    await _append(pair.log, _batch(1))
    await pair.leader_engine.flush()
    assert (await pair.reader.read("t", 0, 0, MIB, read_committed=False)).records
    await pair.leader.delete_topic("t")
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.unknown_topic_or_partition
    await pair.reader_logs.refresh()
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert res.error == ErrorCode.unknown_topic_or_partition


async def test_read_committed_stops_before_transactional_data(pair: Pair) -> None:
    await _append(pair.log, _batch(2))  # 0-1
    await _append(pair.log, _batch(2))  # 2-3
    await _append(pair.log, _batch(2, txn_pid=7))  # 4-5: an open transaction
    await _append(pair.log, _batch(2))  # 6-7
    await pair.leader_engine.flush()
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=True)
    assert _values(res.records) == [0, 2] and not res.to_leader
    res = await pair.reader.read("t", 0, 4, MIB, read_committed=True)
    assert res.records == b"" and res.to_leader  # the leader filters transactions
    # read_uncommitted gets every batch, as from the leader
    res = await pair.reader.read("t", 0, 0, MIB, read_committed=False)
    assert _values(res.records) == [0, 2, 4, 6]


def test_committed_prefix_skips_batches_below_the_offset_and_stops_at_markers() -> None:
    a = build_batch([(None, b"a", [], 1)], base_offset=0)
    txn = build_batch(
        [(None, b"t", [], 1)], base_offset=1, producer_id=3, producer_epoch=0,
        base_sequence=0, attributes=0x10,
    )  # fmt: skip
    b = build_batch([(None, b"b", [], 1)], base_offset=2)
    marker = build_control_batch(3, 0, True, 0, 1, base_offset=3)
    c = build_batch([(None, b"c", [], 1)], base_offset=4)
    data = a + txn + b + marker + c
    assert committed_prefix(data, 0) == (a, False)
    assert committed_prefix(data, 1) == (b"", True)
    assert committed_prefix(data, 2) == (b, False)
    assert committed_prefix(data, 3) == (b"", True)
    assert committed_prefix(data, 4) == (c, False)
