"""One background task that wakes groups at their deadlines.

Groups are kept in a heap keyed by the earliest deadline each one asked for
(:attr:`Group.wake_at`). Stale entries (a group that was rescheduled, deleted or
whose deadline moved) cost one harmless :meth:`Group.tick`. The task sleeps
until the earliest deadline, at most ``max_sleep`` seconds so that an injected
clock that does not follow the event loop's time is still re-read; it never
spins.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable

from ingest.group.group import Group

__all__ = ["DeadlineTimer"]

_log = logging.getLogger(__name__)


class DeadlineTimer:
    def __init__(
        self,
        clock: Callable[[], float],
        on_due: Callable[[Group, float], None],
        max_sleep: float = 1.0,
    ) -> None:
        self._clock = clock
        self._on_due = on_due
        self._max_sleep = max_sleep
        self._heap: list[tuple[float, int, Group]] = []
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def schedule(self, group: Group) -> None:
        """Queue the deadline ``group`` noted since it was last scheduled."""
        if not group.wake_dirty:
            return
        group.wake_dirty = False
        if math.isinf(group.wake_at):
            return
        first = self._heap[0][0] if self._heap else math.inf
        heapq.heappush(self._heap, (group.wake_at, next(self._seq), group))
        if group.wake_at < first:
            self._wakeup.set()

    def run_due(self) -> None:
        """Tick every group whose deadline has passed."""
        now = self._clock()
        due: list[Group] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        for group in dict.fromkeys(due):  # a group may be queued more than once
            try:
                self._on_due(group, now)
            except Exception:  # a bug in one group must not stop the others' timers
                _log.exception("group %r timer failed", group.group_id)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="group-coordinator-timer"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            self.run_due()
            delay = self._max_sleep
            if self._heap:
                delay = min(delay, max(self._heap[0][0] - self._clock(), 0.0))
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout=delay)
            except TimeoutError:
                pass
