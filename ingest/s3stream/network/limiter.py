"""A tiered network rate limiter: token buckets plus a priority queue.

Traffic classes, highest priority first: ``TAIL_READ``, ``CATCH_UP_READ``,
``COMPACTION``, ``TABLE_WRITE``. ``PRODUCE`` (WAL and upload traffic) is never
limited. The limiter has a total rate (bytes/s) and each class a share of it:

- a class never takes more than its share over time (its own token bucket,
  with a burst of one second of its share);
- within the total, waiting requests are served in priority order: a waiting
  tail read goes before a waiting compaction read when tokens free up.

A request larger than a bucket's burst is let through once the bucket is
full and then leaves it in debt (it still costs its bytes), so large ranged
GETs are neither refused nor split. Event loop only.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import time
from dataclasses import dataclass, field

__all__ = ["NetworkRateLimiter", "TrafficClass"]


class TrafficClass(enum.IntEnum):
    """Lower value = higher priority."""

    PRODUCE = 0
    TAIL_READ = 1
    CATCH_UP_READ = 2
    COMPACTION = 3
    TABLE_WRITE = 4


@dataclass(slots=True)
class _Bucket:
    rate: float
    burst: float
    tokens: float
    stamp: float = field(default_factory=time.monotonic)

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def ready(self, nbytes: int) -> bool:
        return self.tokens >= min(nbytes, self.burst)

    def wait_for(self, nbytes: int) -> float:
        need = min(nbytes, self.burst) - self.tokens
        return 0.0 if need <= 0 else need / self.rate


class NetworkRateLimiter:
    """Shares of ``bytes_per_second`` per :class:`TrafficClass`.

    ``bytes_per_second <= 0`` disables limiting (every ``acquire`` returns at
    once). Shares are fractions of the total (they may add up to more than 1:
    the total still caps them together).
    """

    def __init__(self, bytes_per_second: float, shares: dict[TrafficClass, float]) -> None:
        self._enabled = bytes_per_second > 0
        rate = max(bytes_per_second, 1.0)
        self._total = _Bucket(rate, rate, rate)
        self._classes = {
            c: _Bucket(rate * s, rate * s, rate * s) for c, s in shares.items() if s > 0
        }
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self.waited_s: dict[TrafficClass, float] = {c: 0.0 for c in TrafficClass}
        self.bytes: dict[TrafficClass, int] = {c: 0 for c in TrafficClass}

    @property
    def enabled(self) -> bool:
        return self._enabled

    async def acquire(self, kind: TrafficClass, nbytes: int) -> None:
        """Wait until ``nbytes`` of ``kind`` may go; ``PRODUCE`` never waits."""
        self.bytes[kind] += nbytes
        if not self._enabled or kind is TrafficClass.PRODUCE:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(kind), next(self._seq), nbytes, fut))
        self._dispatch()
        if fut.done():
            return
        start = time.monotonic()
        try:
            await fut
        finally:
            self.waited_s[kind] += time.monotonic() - start

    def _dispatch(self) -> None:
        """Grant waiters in priority order while the buckets allow."""
        self._timer = None
        now = time.monotonic()
        self._total.refill(now)
        for b in self._classes.values():
            b.refill(now)
        wait = float("inf")
        kept: list[tuple[int, int, int, asyncio.Future[None]]] = []
        while self._waiters:
            item = heapq.heappop(self._waiters)
            prio, _seq, nbytes, fut = item
            if fut.done():  # cancelled
                continue
            cls = self._classes.get(TrafficClass(prio))
            if cls is not None and not cls.ready(nbytes):
                wait = min(wait, cls.wait_for(nbytes))
                kept.append(item)
                continue
            if not self._total.ready(nbytes):
                # lower priorities must not overtake on the shared total
                wait = min(wait, self._total.wait_for(nbytes))
                kept.append(item)
                kept.extend(self._waiters)
                self._waiters = []
                break
            self._total.tokens -= nbytes
            if cls is not None:
                cls.tokens -= nbytes
            fut.set_result(None)
        for item in kept:
            heapq.heappush(self._waiters, item)
        if self._waiters and wait != float("inf"):
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(wait, 0.001), self._dispatch)
