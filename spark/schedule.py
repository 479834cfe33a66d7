"""Run a job on a fixed schedule until told to stop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["run_every"]

_log = logging.getLogger(__name__)


def run_every(
    interval_s: float,
    job: Callable[[], object],
    stop: threading.Event | None = None,
    max_runs: int | None = None,
) -> int:
    """Call ``job`` now and then every ``interval_s`` (measured start to start).

    A failing run is logged and the schedule goes on. Returns the number of runs,
    when ``stop`` is set or after ``max_runs``.
    """
    stop = stop or threading.Event()
    runs = 0
    while not stop.is_set():
        started = time.monotonic()
        try:
            job()
        except Exception:
            _log.exception("scheduled run failed")
        runs += 1
        if max_runs is not None and runs >= max_runs:
            break
        stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
    return runs
