"""One stream of the S3Stream engine: offsets, in-order confirmation, fetch."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ingest.s3stream.api import BatchTransform, RewriteStats, StreamBatch
from ingest.s3stream.errors import OffsetOutOfRangeError, UnknownStreamError

if TYPE_CHECKING:
    from ingest.s3stream.engine import S3StreamEngine

__all__ = ["S3Stream"]


@dataclass(slots=True, eq=False)
class _Inflight:
    base_offset: int
    end_offset: int
    result: asyncio.Future[int]
    durable: bool = False
    error: BaseException | None = None


class S3Stream:
    """A :class:`~ingest.s3stream.api.Stream` backed by the engine's WAL,
    log cache and objects. Create or open it through the engine."""

    def __init__(
        self,
        engine: S3StreamEngine,
        stream_id: int,
        start_offset: int,
        next_offset: int,
        committed_end: int,
    ) -> None:
        self._engine = engine
        self._id = stream_id
        self._start = start_offset
        self._next = next_offset
        self._confirm = next_offset
        self.committed_end = committed_end  # end of the data committed to objects
        self._inflight: deque[_Inflight] = deque()
        self.deleted = False
        self.rewrites = 0  # raised by every rewrite: a fetch that saw one starts over

    def __repr__(self) -> str:
        return (
            f"S3Stream(id={self._id}, start={self._start}, confirm={self._confirm}, "
            f"next={self._next})"
        )

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
        return self._confirm

    # --- append ------------------------------------------------------------------
    def append(self, payload: bytes | memoryview, count: int) -> Awaitable[int]:
        """Assign ``base_offset = next_offset`` now; resolve once fsync'd.

        ``payload`` is kept by reference if it is ``bytes`` (it must not change
        afterwards); any other buffer is copied once.
        """
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        if count <= 0:
            raise ValueError("count must be positive")
        if not isinstance(payload, bytes):
            payload = bytes(payload)
        base = self._next
        inflight = self._engine._append(self, base, count, payload)
        self._next = base + count
        return inflight

    def _track(self, base: int, end: int, result: asyncio.Future[int]) -> _Inflight:
        item = _Inflight(base, end, result)
        self._inflight.append(item)
        return item

    def _on_durable(self, item: _Inflight, error: BaseException | None) -> None:
        """Record one append's outcome; confirm the contiguous durable prefix."""
        item.durable = True
        item.error = error
        q = self._inflight
        while q and q[0].durable:
            head = q.popleft()
            if head.error is None and not self._fenced_before(head):
                self._confirm = head.end_offset
                if not head.result.done():
                    head.result.set_result(head.base_offset)
            elif not head.result.done():
                head.result.set_exception(head.error or self._engine._fence_error())

    def _fenced_before(self, item: _Inflight) -> bool:
        # After a failed append nothing later may be confirmed: offsets would skip.
        return self._confirm != item.base_offset

    async def wait_inflight(self) -> None:
        """Wait until every append issued so far has resolved (success or not)."""
        if self._inflight:
            await asyncio.gather(*(i.result for i in list(self._inflight)), return_exceptions=True)

    # --- fetch and trim -------------------------------------------------------------
    async def fetch(self, start_offset: int, end_offset: int, max_bytes: int) -> list[StreamBatch]:
        """Whole batches from the one containing ``start_offset``, below
        ``min(end_offset, confirm_offset)``, up to ``max_bytes`` (at least one).

        Raises ``OffsetOutOfRangeError`` if ``start_offset`` is below
        ``start_offset`` or above ``confirm_offset``.
        """
        for _ in range(3):
            seen = self.rewrites
            out = await self._fetch_once(start_offset, end_offset, max_bytes)
            if self.rewrites == seen:
                break
        return out

    async def _fetch_once(
        self, start_offset: int, end_offset: int, max_bytes: int
    ) -> list[StreamBatch]:
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        if start_offset < self._start or start_offset > self._confirm:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} outside [{self._start}, {self._confirm}] of stream {self._id}"
            )
        end = min(end_offset, self._confirm)
        out: list[StreamBatch] = []
        total = 0
        pos = start_offset
        cache = self._engine._log_cache
        while pos < end and (not out or total < max_bytes):
            batches = cache.get(self._id, pos, end, max_bytes - total)
            if not batches:
                held = len(out)
                total, done = await self._engine._read_objects(
                    self, pos, end, max_bytes, out, total
                )
                if len(out) == held:
                    break
                pos = out[-1].end_offset
                if done:
                    break
                continue
            full = False
            for b in batches:
                size = len(b.payload)
                if out and total + size > max_bytes:
                    full = True
                    break
                out.append(b)
                total += size
                pos = b.end_offset
            if full:
                break
        return out

    async def trim(self, new_start_offset: int) -> None:
        """Move ``start_offset`` forward (durably, in the metadata store).

        Raises ``OffsetOutOfRangeError`` beyond ``confirm_offset``; a smaller
        offset than the current start is a no-op.
        """
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        if new_start_offset <= self._start:
            return
        if new_start_offset > self._confirm:
            raise OffsetOutOfRangeError(
                f"cannot trim stream {self._id} to {new_start_offset} beyond {self._confirm}"
            )
        await self._engine._trim(self, new_start_offset)
        self._start = max(self._start, new_start_offset)

    async def rewrite(
        self, start_offset: int, end_offset: int, transform: BatchTransform
    ) -> RewriteStats:
        """See :meth:`ingest.s3stream.api.Stream.rewrite`: only the part in
        object storage (below ``committed_end``) is rewritten."""
        if self.deleted:
            raise UnknownStreamError(f"stream {self._id} is deleted")
        return await self._engine._rewrite(self, start_offset, end_offset, transform)
