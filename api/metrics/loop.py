"""Event loop lag: how late the loop runs a timer it set for itself.

Every produce and fetch of the process passes through one event loop, so
while the loop is held (by a long callback, a garbage collection, a thread
holding the GIL, or the process waiting for a CPU) every request waits with
it. A task sleeps ``interval_s`` again and again and observes how much later
than asked it woke: a stall of ``d`` seconds that covers a wake-up shows as
a lag of up to ``d``. It costs one timer per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from prometheus_client import CollectorRegistry, Gauge, Histogram

from ingest.s3stream.latency import FINE_BUCKETS

__all__ = ["LoopLagMonitor"]


class LoopLagMonitor:
    def __init__(self, registry: CollectorRegistry, interval_s: float = 0.01) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.lag = Histogram(
            "tidelake_event_loop_lag_seconds",
            f"How much later than due the event loop ran a timer set every "
            f"{interval_s * 1000:g} ms: time it was held by other work or waited for a CPU.",
            buckets=FINE_BUCKETS,
            registry=registry,
        )
        self.worst = Gauge(
            "tidelake_event_loop_lag_max_seconds",
            "The largest event loop lag seen since the process started.",
            registry=registry,
        )
        self._worst = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        clock = time.perf_counter
        interval = self.interval_s
        while True:
            due = clock() + interval
            await asyncio.sleep(interval)
            late = max(0.0, clock() - due)
            self.lag.observe(late)
            if late > self._worst:
                self._worst = late
                self.worst.set(late)
