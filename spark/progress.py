"""Progress of running Spark jobs, polled from Spark's status tracker in a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = ["SparkProgress", "StageProgress"]


@dataclass(frozen=True)
class StageProgress:
    """Tasks done and in all of the active stages (a snapshot)."""

    stages: int
    tasks_done: int
    tasks_total: int
    description: str


class SparkProgress:
    """``with SparkProgress(session, callback):`` calls ``callback`` about every ``interval_s``."""

    def __init__(
        self,
        session: Any,
        callback: Callable[[StageProgress], None],
        interval_s: float = 0.5,
    ) -> None:
        self._tracker = session.sparkContext.statusTracker()
        self._callback = callback
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def poll(self) -> StageProgress:
        done = total = 0
        names: list[str] = []
        stage_ids = list(self._tracker.getActiveStageIds())
        for stage_id in stage_ids:
            info = self._tracker.getStageInfo(stage_id)
            if info is None:
                continue
            done += info.numCompletedTasks
            total += info.numTasks
            names.append(str(info.name).split(" at ")[0])
        return StageProgress(len(stage_ids), done, total, ", ".join(names[:2]))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._callback(self.poll())
            except Exception:  # noqa: BLE001 - progress must never break the job
                return

    def __enter__(self) -> SparkProgress:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
