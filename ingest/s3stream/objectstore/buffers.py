"""Recycled buffers for large object reads.

A catch-up read keeps what it GETs in the block cache, so each GET needs fresh
memory of a slightly different size. The allocator hands those out as new
pages: the kernel then faults in and zeroes every page the socket copy
touches, ~9 % of a catch-up read's CPU (measured with ``perf``: huge-page
faults under ``recv``, whether from glibc, jemalloc or mimalloc). Reusing
buffers avoids it.

A buffer is reused only when nothing refers to it any more: every memoryview
of a ``bytearray`` (including slices of slices) holds a reference to it, so a
buffer whose only reference is the pool's own is free, whatever views of it
were handed out before (the block cache's ranges, batch payloads in fetch
responses still being written). CPython only; checked under the pool's lock.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["ReadBufferPool"]

# references to a free buffer seen by ``sys.getrefcount(buffers[i])``: the
# pool's list and the call's own argument
_FREE_REFS = 2


class ReadBufferPool:
    """Up to ``budget_bytes`` of ``bytearray`` buffers, in ``granule`` steps.

    ``take(n)`` returns a writable memoryview of ``n`` bytes: a free pooled
    buffer of that size class if there is one, else a new pooled one (making
    room by dropping free buffers of other sizes), else ``None`` when buffers
    in use fill the budget. Thread-safe.
    """

    def __init__(self, budget_bytes: int, granule: int = 256 * 1024) -> None:
        if granule <= 0:
            raise ValueError("granule must be positive")
        self._budget = budget_bytes
        self._granule = granule
        self._buffers: list[bytearray] = []
        self._bytes = 0
        self._lock = threading.Lock()
        self.reused = 0
        self.allocated = 0
        self.unpooled = 0

    @property
    def pooled_bytes(self) -> int:
        return self._bytes

    def take(self, n: int) -> memoryview | None:
        size = -(-n // self._granule) * self._granule
        bufs = self._buffers
        with self._lock:
            for i in range(len(bufs)):
                if len(bufs[i]) == size and sys.getrefcount(bufs[i]) == _FREE_REFS:
                    self.reused += 1
                    return memoryview(bufs[i])[:n]
            if self._bytes + size > self._budget:
                self._drop_free(self._bytes + size - self._budget)
            if self._bytes + size <= self._budget:
                buf = bytearray(size)
                bufs.append(buf)
                self._bytes += size
                self.allocated += 1
                return memoryview(buf)[:n]
            self.unpooled += 1
            return None

    def trim(self) -> int:
        """Drop every free buffer; returns the bytes dropped."""
        with self._lock:
            return self._drop_free(self._bytes)

    def _drop_free(self, want: int) -> int:
        bufs = self._buffers
        dropped = 0
        i = 0
        while i < len(bufs) and dropped < want:
            if sys.getrefcount(bufs[i]) == _FREE_REFS:
                dropped += len(bufs[i])
                del bufs[i]
            else:
                i += 1
        self._bytes -= dropped
        return dropped
