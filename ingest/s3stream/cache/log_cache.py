"""The log cache: recently appended batches of every stream, in memory.

Every append enters the log cache at once (before it is durable) and stays
until it has been uploaded to an object *and* the cache needs room. Entries
not yet uploaded are never evicted: when they alone exceed the budget the
owner must force uploads (``over_budget``). Fetches of the stream tail are
served from here without touching object storage.

Not thread-safe: used from the event loop only. An upload's bookkeeping
(what is pending, picked, uploaded) is index arithmetic and binary searches
over per-stream arrays, never a walk over its entries: an upload of a
latency-bound producer's traffic holds thousands of small batches, and a
walk over them (3-5 ms per upload, measured) stalls every request the loop
is serving meanwhile.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from ingest.s3stream.api import StreamBatch

__all__ = ["CacheEntry", "LogCache"]


@dataclass(slots=True, eq=False)
class CacheEntry:
    batch: StreamBatch
    wal_position: int
    size: int


@dataclass(slots=True)
class _StreamLog:
    entries: list[CacheEntry] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)  # entries[i].batch.base_offset
    ends: list[int] = field(default_factory=list)  # entries[i].batch.end_offset
    # bytes of the stream's entries before entries[i], since the stream's
    # first put (only differences are used, so compaction leaves them be)
    before: list[int] = field(default_factory=list)
    total: int = 0  # bytes of every entry put so far
    head: int = 0  # index of the first live entry
    upload_idx: int = 0  # index of the first entry not uploaded
    picked_idx: int = 0  # index of the first entry not picked for an upload (>= upload_idx)

    def bytes_between(self, start: int, stop: int) -> int:
        """Bytes of entries[start:stop]."""
        if start >= stop:
            return 0
        end = self.total if stop >= len(self.entries) else self.before[stop]
        return end - self.before[start]

    def upto(self, offset: int, lo: int) -> int:
        """The index of the first entry at or after ``lo`` that ends past ``offset``."""
        return bisect.bisect_right(self.ends, offset, lo=lo)

    def compact(self) -> None:
        if self.head > 256 and self.head * 2 > len(self.entries):
            del self.entries[: self.head]
            del self.bases[: self.head]
            del self.ends[: self.head]
            del self.before[: self.head]
            self.upload_idx -= self.head
            self.picked_idx -= self.head
            self.head = 0


class LogCache:
    """Per-stream batches in offset order, bounded to ``capacity`` bytes of
    uploaded data (un-uploaded data is never dropped)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._streams: dict[int, _StreamLog] = {}
        # uploaded ranges in upload order: (stream id, end offset), one per
        # mark_uploaded; eviction drops their entries oldest first
        self._evictable: deque[tuple[int, int]] = deque()
        self._bytes = 0
        self._unuploaded_bytes = 0
        self.hits = 0  # reads ``get`` answered (read by metrics)
        self.misses = 0  # reads that go on to object storage

    @property
    def size(self) -> int:
        return self._bytes

    @property
    def unuploaded_bytes(self) -> int:
        return self._unuploaded_bytes

    @property
    def over_budget(self) -> bool:
        """True when un-uploaded data alone fills the cache (force an upload)."""
        return self._unuploaded_bytes >= self._capacity

    def put(self, batch: StreamBatch, wal_position: int) -> CacheEntry:
        """Add the next batch of a stream (offsets must follow the previous one)."""
        log = self._streams.get(batch.stream_id)
        if log is None:
            log = self._streams[batch.stream_id] = _StreamLog()
        size = len(batch.payload)
        entry = CacheEntry(batch, wal_position, size)
        log.entries.append(entry)
        log.bases.append(batch.base_offset)
        log.ends.append(batch.base_offset + batch.count)
        log.before.append(log.total)
        log.total += size
        self._bytes += size
        self._unuploaded_bytes += size
        return entry

    def get(self, stream_id: int, start: int, end: int, max_bytes: int) -> list[StreamBatch]:
        """Batches from the one containing ``start`` up to ``end`` (exclusive)
        and ``max_bytes`` (at least one). Empty if ``start`` is not cached."""
        log = self._streams.get(stream_id)
        if log is None or log.head >= len(log.entries):
            self.misses += 1
            return []
        i = bisect.bisect_right(log.bases, start, lo=log.head) - 1
        if i < log.head:
            self.misses += 1
            return []
        entries = log.entries
        if entries[i].batch.end_offset <= start:
            self.misses += 1
            return []
        self.hits += 1
        out: list[StreamBatch] = []
        total = 0
        n = len(entries)
        while i < n:
            b = entries[i].batch
            if b.base_offset >= end:
                break
            if out and total + entries[i].size > max_bytes:
                break
            out.append(b)
            total += entries[i].size
            i += 1
        return out

    def first_offset(self, stream_id: int) -> int | None:
        log = self._streams.get(stream_id)
        if log is None or log.head >= len(log.entries):
            return None
        return log.entries[log.head].batch.base_offset

    def pending(self, stream_id: int, below: int, max_bytes: int | None = None) -> list[CacheEntry]:
        """Entries neither uploaded nor picked whose batches end at or below
        ``below``, oldest first, stopping once ``max_bytes`` is reached (at
        least one)."""
        return self.pending_with_bytes(stream_id, below, max_bytes)[0]

    def pending_with_bytes(
        self, stream_id: int, below: int, max_bytes: int | None = None
    ) -> tuple[list[CacheEntry], int]:
        """:meth:`pending`, and the bytes of what it returns."""
        log = self._streams.get(stream_id)
        if log is None:
            return [], 0
        start = log.picked_idx
        stop = log.upto(below, start)
        if max_bytes is not None and stop > start:
            # the first entry with max_bytes or more before it stops the run
            limit = log.before[start] + max_bytes
            stop = min(stop, bisect.bisect_left(log.before, limit, lo=start, hi=stop))
        return log.entries[start:stop], log.bytes_between(start, stop)

    def streams_with_pending(self) -> list[int]:
        return [sid for sid, log in self._streams.items() if log.picked_idx < len(log.entries)]

    def mark_picked(self, stream_id: int, upto_offset: int) -> None:
        """Entries ending at or below ``upto_offset`` are being uploaded:
        ``pending`` skips them (they stay un-uploaded until ``mark_uploaded``)."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        log.picked_idx = log.upto(upto_offset, log.picked_idx)

    def unpick_all(self) -> None:
        """Forget every pick not uploaded (after a failed upload)."""
        for log in self._streams.values():
            log.picked_idx = log.upload_idx

    def mark_uploaded(self, stream_id: int, upto_offset: int) -> None:
        """Mark every entry ending at or below ``upto_offset`` as uploaded."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        start = log.upload_idx
        stop = log.upto(upto_offset, start)
        if stop == start:
            return
        self._unuploaded_bytes -= log.bytes_between(start, stop)
        self._evictable.append((stream_id, log.ends[stop - 1]))
        log.upload_idx = stop
        log.picked_idx = max(log.picked_idx, stop)

    def min_unuploaded_wal_position(self) -> int | None:
        """The WAL position of the oldest entry not yet uploaded, if any."""
        best: int | None = None
        for log in self._streams.values():
            if log.upload_idx < len(log.entries):
                p = log.entries[log.upload_idx].wal_position
                if best is None or p < best:
                    best = p
        return best

    def evict(self) -> int:
        """Drop the oldest uploaded entries while over capacity; returns bytes freed."""
        freed = 0
        while self._bytes > self._capacity and self._evictable:
            sid, end = self._evictable[0]
            log = self._streams.get(sid)
            # the range's entries still here (trim may have dropped some)
            if log is None or log.head >= log.upload_idx or log.ends[log.head] > end:
                self._evictable.popleft()
                continue
            # the fewest of the range's entries, oldest first, that bring the
            # cache back within its capacity (or all of them)
            stop = min(log.upto(end, log.head), log.upload_idx)
            target = log.before[log.head] + self._bytes - self._capacity
            k = bisect.bisect_left(log.before, target, lo=log.head + 1, hi=stop)
            dropped = log.bytes_between(log.head, k)
            self._bytes -= dropped
            freed += dropped
            log.head = k
            log.compact()
        return freed

    def trim(self, stream_id: int, start_offset: int) -> None:
        """Drop uploaded entries wholly below ``start_offset``."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        stop = min(log.upto(start_offset, log.head), log.upload_idx)
        if stop > log.head:
            self._bytes -= log.bytes_between(log.head, stop)
            log.head = stop
        log.compact()

    def drop_stream(self, stream_id: int) -> None:
        """Forget a stream entirely (uploaded or not)."""
        log = self._streams.pop(stream_id, None)
        if log is None:
            return
        self._evictable = deque(r for r in self._evictable if r[0] != stream_id)
        end = len(log.entries)
        self._bytes -= log.bytes_between(log.head, end)
        self._unuploaded_bytes -= log.bytes_between(max(log.head, log.upload_idx), end)
