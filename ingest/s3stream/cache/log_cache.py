"""The log cache: recently appended batches of every stream, in memory.

Every append enters the log cache at once (before it is durable) and stays
until it has been uploaded to an object *and* the cache needs room. Entries
not yet uploaded are never evicted: when they alone exceed the budget the
owner must force uploads (``over_budget``). Fetches of the stream tail are
served from here without touching object storage.

Not thread-safe: used from the event loop only.
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
    uploaded: bool = False
    evicted: bool = False


@dataclass(slots=True)
class _StreamLog:
    entries: list[CacheEntry] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    head: int = 0  # index of the first live entry
    upload_idx: int = 0  # index of the first entry not uploaded
    picked_idx: int = 0  # index of the first entry not picked for an upload (>= upload_idx)

    def compact(self) -> None:
        if self.head > 256 and self.head * 2 > len(self.entries):
            del self.entries[: self.head]
            del self.bases[: self.head]
            self.upload_idx -= self.head
            self.picked_idx -= self.head
            self.head = 0


class LogCache:
    """Per-stream batches in offset order, bounded to ``capacity`` bytes of
    uploaded data (un-uploaded data is never dropped)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._streams: dict[int, _StreamLog] = {}
        self._evictable: deque[tuple[int, CacheEntry]] = deque()
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
        """Entries not yet uploaded whose batches end at or below ``below``,
        oldest first, stopping once ``max_bytes`` is reached (at least one)."""
        log = self._streams.get(stream_id)
        if log is None:
            return []
        out: list[CacheEntry] = []
        total = 0
        entries = log.entries
        for i in range(log.picked_idx, len(entries)):
            e = entries[i]
            if e.batch.end_offset > below or (max_bytes is not None and total >= max_bytes):
                break
            out.append(e)
            total += e.size
        return out

    def streams_with_pending(self) -> list[int]:
        return [sid for sid, log in self._streams.items() if log.picked_idx < len(log.entries)]

    def mark_picked(self, stream_id: int, upto_offset: int) -> None:
        """Entries ending at or below ``upto_offset`` are being uploaded:
        ``pending`` skips them (they stay un-uploaded until ``mark_uploaded``)."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        entries = log.entries
        while (
            log.picked_idx < len(entries)
            and entries[log.picked_idx].batch.end_offset <= upto_offset
        ):
            log.picked_idx += 1

    def unpick_all(self) -> None:
        """Forget every pick not uploaded (after a failed upload)."""
        for log in self._streams.values():
            log.picked_idx = log.upload_idx

    def mark_uploaded(self, stream_id: int, upto_offset: int) -> None:
        """Mark every entry ending at or below ``upto_offset`` as uploaded."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        entries = log.entries
        while log.upload_idx < len(entries):
            e = entries[log.upload_idx]
            if e.batch.end_offset > upto_offset:
                break
            e.uploaded = True
            self._unuploaded_bytes -= e.size
            self._evictable.append((stream_id, e))
            log.upload_idx += 1
        log.picked_idx = max(log.picked_idx, log.upload_idx)

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
            sid, entry = self._evictable.popleft()
            if entry.evicted:
                continue
            log = self._streams.get(sid)
            if log is None or log.head >= len(log.entries) or log.entries[log.head] is not entry:
                entry.evicted = True
                continue
            self._drop_head(log)
            freed += entry.size
            log.compact()
        return freed

    def _drop_head(self, log: _StreamLog) -> None:
        entry = log.entries[log.head]
        entry.evicted = True
        self._bytes -= entry.size
        if not entry.uploaded:
            self._unuploaded_bytes -= entry.size
            log.upload_idx = max(log.upload_idx, log.head + 1)
            log.picked_idx = max(log.picked_idx, log.upload_idx)
        log.head += 1

    def trim(self, stream_id: int, start_offset: int) -> None:
        """Drop uploaded entries wholly below ``start_offset``."""
        log = self._streams.get(stream_id)
        if log is None:
            return
        while log.head < log.upload_idx and log.entries[log.head].batch.end_offset <= start_offset:
            self._drop_head(log)
        log.compact()

    def drop_stream(self, stream_id: int) -> None:
        """Forget a stream entirely (uploaded or not)."""
        log = self._streams.pop(stream_id, None)
        if log is None:
            return
        for e in log.entries[log.head :]:
            e.evicted = True
            self._bytes -= e.size
            if not e.uploaded:
                self._unuploaded_bytes -= e.size
