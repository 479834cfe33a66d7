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
GETs are neither refused nor split.

Produce first: the engine reports each append (:meth:`note_produce`). While
anything has been produced within the last ``busy_window_s``, the background
classes (``busy_classes``: catch-up reads and compaction) share at most
``busy_bytes_per_second``; once produce has been quiet that long they run at
``bytes_per_second`` (unlimited when 0). A cold catch-up read on an idle
broker thus gets all the bandwidth and CPU there is, and the same read on a
broker taking writes cannot push produce latency up. Tail reads and table
writes keep up with produce, so the busy cap leaves them alone (with
``bytes_per_second`` also set, the lower busy total applies to every class
while produce is active). Event loop only.
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
    """Tokens in bytes; ``share`` of the limiter's current total rate refills
    it, and one second of that rate is its burst."""

    share: float
    tokens: float
    stamp: float = field(default_factory=time.monotonic)

    def refill(self, now: float, total: float) -> None:
        rate = total * self.share
        self.tokens = min(rate, self.tokens + (now - self.stamp) * rate)
        self.stamp = now

    def ready(self, nbytes: int, total: float) -> bool:
        return self.tokens >= min(nbytes, total * self.share)

    def wait_for(self, nbytes: int, total: float) -> float:
        rate = total * self.share
        need = min(nbytes, rate) - self.tokens
        return 0.0 if need <= 0 else need / rate


class NetworkRateLimiter:
    """Shares of a total rate per :class:`TrafficClass`.

    The total is ``bytes_per_second``, lowered to ``busy_bytes_per_second``
    while produce is active (see the module docs); 0 means no limit from that
    setting, and with neither in force ``acquire`` returns at once. Shares are
    fractions of the total (they may add up to more than 1: the total still
    caps them together).
    """

    def __init__(
        self,
        bytes_per_second: float,
        shares: dict[TrafficClass, float],
        *,
        busy_bytes_per_second: float = 0,
        busy_window_s: float = 1.0,
        busy_classes: frozenset[TrafficClass] = frozenset(
            {TrafficClass.CATCH_UP_READ, TrafficClass.COMPACTION}
        ),
    ) -> None:
        self._busy_classes = busy_classes
        self._idle_rate = max(float(bytes_per_second), 0.0)
        self._busy_rate = max(float(busy_bytes_per_second), 0.0)
        if self._idle_rate and self._busy_rate:
            self._busy_rate = min(self._busy_rate, self._idle_rate)
        self._busy_window = busy_window_s
        self._last_produce = -float("inf")
        rate = self._busy_rate or self._idle_rate or 1.0
        self._total = _Bucket(1.0, rate)
        self._classes = {c: _Bucket(s, rate * s) for c, s in shares.items() if s > 0}
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self.waited_s: dict[TrafficClass, float] = {c: 0.0 for c in TrafficClass}
        self.bytes: dict[TrafficClass, int] = {c: 0 for c in TrafficClass}

    @property
    def enabled(self) -> bool:
        return bool(self._idle_rate or self._busy_rate)

    def limits(self, kind: TrafficClass) -> bool:
        """Whether ``acquire`` of ``kind`` may ever wait."""
        if kind is TrafficClass.PRODUCE:
            return False
        return bool(self._idle_rate or (self._busy_rate and kind in self._busy_classes))

    def note_produce(self, nbytes: int) -> None:
        """Produce traffic happened now (it never waits; it makes the limiter busy)."""
        self.bytes[TrafficClass.PRODUCE] += nbytes
        self._last_produce = time.monotonic()

    def current_rate(self, now: float | None = None) -> float:
        """The total for limited traffic now, in bytes/s (0: unlimited)."""
        if self._busy_rate:
            now = time.monotonic() if now is None else now
            if now - self._last_produce < self._busy_window:
                return self._busy_rate
        return self._idle_rate

    async def acquire(self, kind: TrafficClass, nbytes: int) -> None:
        """Wait until ``nbytes`` of ``kind`` may go; ``PRODUCE`` never waits."""
        self.bytes[kind] += nbytes
        if kind is TrafficClass.PRODUCE:
            return
        if not self._idle_rate:  # only the busy cap can hold it back
            if kind not in self._busy_classes:
                return
            if not self._waiters and not self.current_rate():
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
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        now = time.monotonic()
        total = self.current_rate(now)
        if not total:  # produce went quiet and nothing else limits: let all go
            for *_, fut in self._waiters:
                if not fut.done():
                    fut.set_result(None)
            self._waiters = []
            return
        self._total.refill(now, total)
        for b in self._classes.values():
            b.refill(now, total)
        wait = float("inf")
        kept: list[tuple[int, int, int, asyncio.Future[None]]] = []
        while self._waiters:
            item = heapq.heappop(self._waiters)
            prio, _seq, nbytes, fut = item
            if fut.done():  # cancelled
                continue
            cls = self._classes.get(TrafficClass(prio))
            if cls is not None and not cls.ready(nbytes, total):
                wait = min(wait, cls.wait_for(nbytes, total))
                kept.append(item)
                continue
            if not self._total.ready(nbytes, total):
                # lower priorities must not overtake on the shared total
                wait = min(wait, self._total.wait_for(nbytes, total))
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
            if self._busy_rate and not self._idle_rate:
                # re-check when produce may have gone quiet
                quiet = self._last_produce + self._busy_window - now
                wait = min(wait, max(quiet, 0.0) + 0.001)
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(wait, 0.001), self._dispatch)
