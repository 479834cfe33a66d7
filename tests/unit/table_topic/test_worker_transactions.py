"""A table topic's partition worker reads committed data only: never past the
last stable offset, never an aborted transaction's records or a marker."""

from __future__ import annotations

import asyncio
import contextlib

from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import BatchHeader, build_batch
from ingest.s3stream import MemoryStreamEngine
from table_topic.convert.chunk import ConvertedChunk, read_batches
from table_topic.worker import PartitionWorker


def _batch(values: list[bytes], pid: int = -1, seq: int = -1) -> bytes:
    return build_batch(
        [(None, v, [], 1000) for v in values],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        attributes=0x10 if pid >= 0 else 0,
    )


async def _append(log: PartitionLog, data: bytes) -> None:
    out = log.append(data)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable


async def _marker(log: PartitionLog, pid: int, commit: bool) -> None:
    out = log.write_marker(pid, 0, commit, 0)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable


async def test_the_worker_converts_committed_records_only_and_stops_at_the_lso() -> None:
    engine = MemoryStreamEngine()
    await engine.start()
    cfg = TopicConfigRegistry.default().resolved({})
    log = PartitionLog("t", 0, await engine.create_stream(), lambda: cfg)
    seen: list[bytes | None] = []
    covered: list[tuple[int, int]] = []

    async def convert(
        partition: int, batches: list[tuple[bytes, BatchHeader]], start: int, next_offset: int
    ) -> ConvertedChunk:
        seen.extend(r.value for r in read_batches(batches, start))
        covered.append((start, next_offset))
        return ConvertedChunk(partition, start, next_offset)

    queue: asyncio.Queue[ConvertedChunk] = asyncio.Queue()
    worker = PartitionWorker(log, 0, convert, queue, asyncio.Event(), 1000, 1 << 20)
    task = asyncio.create_task(worker.run())
    try:
        await _append(log, _batch([b"plain"]))  # 0
        await _append(log, _batch([b"c1", b"c2"], pid=1, seq=0))  # 1-2, committed
        await _append(log, _batch([b"a1"], pid=2, seq=0))  # 3, aborted
        await _append(log, _batch([b"o1"], pid=3, seq=0))  # 4, open for now
        await _marker(log, 1, commit=True)  # 5
        await _marker(log, 2, commit=False)  # 6
        await _append(log, _batch([b"later"]))  # 7
        await asyncio.wait_for(_through(queue, 4), 5)
        assert seen == [b"plain", b"c1", b"c2"]  # nothing of the open transaction yet
        await _marker(log, 3, commit=True)  # 8
        await asyncio.wait_for(_through(queue, 9), 5)
        assert seen == [b"plain", b"c1", b"c2", b"o1", b"later"]
        assert covered[0][0] == 0 and covered[-1][1] == 9
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await engine.close()


async def test_a_log_ending_with_an_aborted_transaction_is_passed_over() -> None:
    engine = MemoryStreamEngine()
    await engine.start()
    cfg = TopicConfigRegistry.default().resolved({})
    log = PartitionLog("t", 0, await engine.create_stream(), lambda: cfg)
    chunks: list[ConvertedChunk] = []

    async def convert(
        partition: int, batches: list[tuple[bytes, BatchHeader]], start: int, next_offset: int
    ) -> ConvertedChunk:
        chunk = ConvertedChunk(
            partition, start, next_offset, rows=len(read_batches(batches, start))
        )
        chunks.append(chunk)
        return chunk

    queue: asyncio.Queue[ConvertedChunk] = asyncio.Queue()
    worker = PartitionWorker(log, 0, convert, queue, asyncio.Event(), 1000, 1 << 20)
    await _append(log, _batch([b"x", b"y"], pid=1, seq=0))  # 0-1
    await _marker(log, 1, commit=False)  # 2
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(_through(queue, 3), 5)
        assert sum(c.rows for c in chunks) == 0
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await engine.close()


async def _through(queue: asyncio.Queue[ConvertedChunk], offset: int) -> None:
    """Wait until the worker has queued chunks covering the offsets below ``offset``."""
    while (await queue.get()).next_offset < offset:
        pass
