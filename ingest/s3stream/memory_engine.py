"""A stream engine in memory: no WAL, no objects, no durability (tests)."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Awaitable

from ingest.s3stream.api import BatchTransform, RewriteStats, StreamBatch
from ingest.s3stream.compact.rewrite import split_runs, transform_runs
from ingest.s3stream.errors import EngineClosedError, OffsetOutOfRangeError, UnknownStreamError
from ingest.s3stream.wal.api import ReplySent

__all__ = ["MemoryStreamEngine"]


class _MemoryStream:
    def __init__(self, stream_id: int) -> None:
        self._id = stream_id
        self._start = 0
        self._next = 0
        self._batches: list[StreamBatch] = []
        self._bases: list[int] = []
        self.deleted = False

    @property
    def stream_id(self) -> int:
        return self._id

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def next_offset(self) -> int:
        return self._next

    @property
    def confirm_offset(self) -> int:
        return self._next

    @property
    def committed_end(self) -> int:
        return self._next

    def append(self, payload: bytes | memoryview, count: int) -> Awaitable[int]:
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        if count <= 0:
            raise ValueError("count must be positive")
        base = self._next
        self._batches.append(StreamBatch(self._id, base, count, bytes(payload)))
        self._bases.append(base)
        self._next = base + count
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        fut.set_result(base)
        return fut

    async def fetch(self, start_offset: int, end_offset: int, max_bytes: int) -> list[StreamBatch]:
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        if start_offset < self._start or start_offset > self._next:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} outside [{self._start}, {self._next}] of stream {self._id}"
            )
        i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        out: list[StreamBatch] = []
        total = 0
        end = min(end_offset, self._next)
        for b in self._batches[i:]:
            if b.base_offset >= end:
                break
            if b.end_offset <= start_offset:
                continue
            if out and total + len(b.payload) > max_bytes:
                break
            out.append(b)
            total += len(b.payload)
        return out

    async def trim(self, new_start_offset: int) -> None:
        if new_start_offset <= self._start:
            return
        if new_start_offset > self._next:
            raise OffsetOutOfRangeError(f"cannot trim stream {self._id} beyond {self._next}")
        self._start = new_start_offset
        k = 0
        while k < len(self._batches) and self._batches[k].end_offset <= new_start_offset:
            k += 1
        del self._batches[:k]
        del self._bases[:k]

    async def rewrite(
        self, start_offset: int, end_offset: int, transform: BatchTransform
    ) -> RewriteStats:
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        stats = RewriteStats()
        end = min(end_offset, self._next)
        lo = bisect.bisect_left(self._bases, start_offset)
        hi = lo
        while hi < len(self._batches) and self._batches[hi].end_offset <= end:
            hi += 1
        if hi == lo:
            return stats
        runs, changed = transform_runs(
            split_runs(self._batches[lo:hi]), start_offset, end, transform, stats
        )
        if not changed:
            return stats
        new = [b for run in runs for b in run]
        new = [StreamBatch(b.stream_id, b.base_offset, b.count, bytes(b.payload)) for b in new]
        self._batches[lo:hi] = new  # one assignment: a reader sees old or new
        self._bases[lo:hi] = [b.base_offset for b in new]
        return stats


class MemoryStreamEngine:
    """A :class:`~ingest.s3stream.api.StreamEngine` whose appends resolve at
    once and whose data lives only in this process."""

    def __init__(self) -> None:
        self._streams: dict[int, _MemoryStream] = {}
        self._next_id = 1
        self._running = False

    @property
    def backpressure_ms(self) -> int:
        """Always 0: nothing is uploaded, so nothing falls behind."""
        return 0

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: ReplySent, first: bool = True
    ) -> int | None:
        """Never: an append here is done when it is issued."""
        return None

    def cancel_reply(self, token: int) -> bool:
        return False

    def sync_now(self) -> None:
        """Nothing to sync."""

    def poll_durable(self) -> None:
        """Nothing to hear of."""

    async def start(self) -> None:
        self._running = True

    def _check(self) -> None:
        if not self._running:
            raise EngineClosedError("the stream engine is not running")

    async def create_stream(self) -> _MemoryStream:
        self._check()
        stream = _MemoryStream(self._next_id)
        self._streams[self._next_id] = stream
        self._next_id += 1
        return stream

    async def open_stream(self, stream_id: int) -> _MemoryStream:
        self._check()
        stream = self._streams.get(stream_id)
        if stream is None:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        return stream

    async def delete_stream(self, stream_id: int) -> None:
        self._check()
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        stream.deleted = True

    async def close(self) -> None:
        self._running = False
