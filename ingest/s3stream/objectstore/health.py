"""How an object store is doing: request outcomes for logs, metrics and status.

A store records two things (from any thread):

- each *attempt* of a request: ``attempt(operation, failure)``, where
  ``failure`` is ``None`` for an answer and otherwise what went wrong (an
  HTTP status such as ``"503 SlowDown"``, or an exception name such as
  ``"ReadTimeoutError"``), and whether it was a retry. An attempt that failed
  may be retried by the client library; "not found" and "precondition failed" are answers, not
  failures.
- each *call* (one logical request, retries included):
  ``call(operation, seconds, error)``.

From those it keeps Prometheus-style counters and latency histograms, and a
health state:

- **degraded** once, within ``window_s``, a call failed after its retries,
  or failed attempts and calls slower than ``slow_s`` number at least
  ``min_problems`` and at least ``min_problem_rate`` of the attempts;
- **healthy** again after ``recover_s`` with none of those.

Entering the degraded state logs a WARNING at once; while it lasts, another
WARNING at most every ``warn_interval_s`` sums up what happened since the
last one (failed requests by operation and status, retries, calls that
failed, the slowest call). Recovery logs an INFO line. States are evaluated
as events arrive and whenever the state is read (``snapshot``), so an idle
store still reports its recovery.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingest.s3stream.latency import LatencyHistogram

__all__ = ["HealthSnapshot", "ObjectStoreHealth", "LATENCY_BUCKETS"]

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the call latency histogram; ``+Inf`` follows."""


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """The state of a store's health at one moment (JSON-able via ``as_json``)."""

    state: str  # "healthy" | "degraded"
    since: float  # wall-clock time (s) the state began
    window_s: float
    attempts_in_window: int
    failures_in_window: int  # failed attempts and failed calls
    slow_calls_in_window: int
    error_rate: float  # failed attempts / attempts, in the window
    slowest_s_in_window: float
    last_error: str | None
    last_error_at: float | None  # wall-clock time (s)

    @property
    def degraded(self) -> bool:
        return self.state == "degraded"

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": _iso(self.since),
            "window_s": self.window_s,
            "attempts": self.attempts_in_window,
            "failures": self.failures_in_window,
            "slow_calls": self.slow_calls_in_window,
            "error_rate": round(self.error_rate, 4),
            "slowest_ms": round(self.slowest_s_in_window * 1000, 1),
            "last_error": self.last_error,
            "last_error_at": _iso(self.last_error_at) if self.last_error_at else None,
        }


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass(slots=True)
class _Second:
    """Counts of one second of the window."""

    at: int
    attempts: int = 0
    failed_attempts: int = 0
    failed_calls: int = 0
    slow_calls: int = 0
    slowest: float = 0.0


@dataclass(slots=True)
class _Summary:
    """What happened since the last WARNING, for the next one."""

    failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    retries: int = 0
    failed_calls: int = 0
    calls: int = 0
    slowest: tuple[float, str] = (0.0, "")
    since: float = 0.0  # monotonic

    def empty(self) -> bool:
        return not (self.failures or self.failed_calls or self.slowest[0])


class ObjectStoreHealth:
    """Request outcomes and the health state of one object store. Thread-safe."""

    def __init__(
        self,
        name: str = "object storage",
        *,
        window_s: float = 10.0,
        recover_s: float = 10.0,
        warn_interval_s: float = 15.0,
        slow_s: float = 2.0,
        min_problems: int = 3,
        min_problem_rate: float = 0.01,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        logger: logging.Logger = log,
    ) -> None:
        self.name = name
        self.window_s = window_s
        self.recover_s = recover_s
        self.warn_interval_s = warn_interval_s
        self.slow_s = slow_s
        self.min_problems = min_problems
        self.min_problem_rate = min_problem_rate
        self._clock = clock
        self._wall = wall_clock
        self._log = logger
        self._lock = threading.Lock()
        # cumulative, for metrics
        self.calls: Counter[tuple[str, str]] = Counter()  # (operation, "ok"|"error")
        self.failed_attempts: Counter[tuple[str, str]] = Counter()  # (operation, failure)
        self.retries: Counter[str] = Counter()  # operation -> retried attempts
        self.latency: dict[str, LatencyHistogram] = {}
        # the window and the state
        self._seconds: deque[_Second] = deque()
        self._degraded = False
        self._since_wall = wall_clock()
        self._degraded_at = 0.0  # monotonic
        self._last_problem = float("-inf")  # monotonic
        self._last_warning = float("-inf")
        self._summary = _Summary(since=clock())
        self._episode_failures = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None

    # --- recording (any thread) -------------------------------------------------------
    def attempt(self, operation: str, failure: str | None = None, *, retry: bool = False) -> None:
        """One attempt of a request answered (``failure`` None) or failed;
        ``retry``: the attempt repeated an earlier one that failed."""
        with self._lock:
            now = self._clock()
            sec = self._second(now)
            sec.attempts += 1
            if retry:
                self.retries[operation] += 1
                self._summary.retries += 1
            if failure is not None:
                sec.failed_attempts += 1
                self.failed_attempts[(operation, failure)] += 1
                self._summary.failures[(operation, failure)] += 1
                self._problem(now, f"{operation}: {failure}")
            lines = self._evaluate(now)
        self._emit(lines)

    def call(self, operation: str, seconds: float, error: str | None = None) -> None:
        """One request done (its retries included), in ``seconds``; ``error``
        says why it failed in the end (``None``: it succeeded)."""
        with self._lock:
            now = self._clock()
            sec = self._second(now)
            self.calls[(operation, "ok" if error is None else "error")] += 1
            hist = self.latency.get(operation)
            if hist is None:
                hist = self.latency[operation] = LatencyHistogram(LATENCY_BUCKETS)
            hist.observe(seconds)
            summary = self._summary
            summary.calls += 1
            if seconds > summary.slowest[0]:
                summary.slowest = (seconds, operation)
            sec.slowest = max(sec.slowest, seconds)
            if error is not None:
                sec.failed_calls += 1
                summary.failed_calls += 1
                self._problem(now, f"{operation} failed after retries: {error}")
            elif seconds >= self.slow_s:
                sec.slow_calls += 1
                self._last_problem = now
            lines = self._evaluate(now)
        self._emit(lines)

    def _problem(self, now: float, what: str) -> None:
        self._last_problem = now
        self.last_error = what[:500]
        self.last_error_at = self._wall()
        if self._degraded:
            self._episode_failures += 1

    def _second(self, now: float) -> _Second:
        at = int(now)
        secs = self._seconds
        if not secs or secs[-1].at != at:
            secs.append(_Second(at))
        self._prune(now)
        return secs[-1]

    def _prune(self, now: float) -> None:
        secs = self._seconds
        while secs and secs[0].at <= now - self.window_s - 1:
            secs.popleft()

    # --- state ------------------------------------------------------------------------
    def _window(self, now: float) -> tuple[int, int, int, int, float]:
        self._prune(now)
        attempts = failed = failed_calls = slow = 0
        slowest = 0.0
        for s in self._seconds:
            attempts += s.attempts
            failed += s.failed_attempts
            failed_calls += s.failed_calls
            slow += s.slow_calls
            slowest = max(slowest, s.slowest)
        return attempts, failed, failed_calls, slow, slowest

    def _evaluate(self, now: float) -> list[tuple[int, str]]:
        """State changes and due warnings; the log lines to emit (outside the lock)."""
        attempts, failed, failed_calls, slow, _ = self._window(now)
        lines: list[tuple[int, str]] = []
        if not self._degraded:
            problems = failed + slow
            if failed_calls or (
                problems >= self.min_problems
                and problems >= self.min_problem_rate * max(attempts, 1)
            ):
                self._degraded = True
                self._degraded_at = now
                self._since_wall = self._wall()
                self._episode_failures = failed + failed_calls
                lines.append((logging.WARNING, self._warning(now, entering=True)))
            return lines
        if now - self._last_problem >= self.recover_s:
            self._degraded = False
            self._since_wall = self._wall()
            lines.append(
                (
                    logging.INFO,
                    f"{self.name} is healthy again after {now - self._degraded_at:.0f} s "
                    f"degraded ({self._episode_failures} failed requests); no failures or "
                    f"slow requests in the last {self.recover_s:.0f} s",
                )
            )
            self._summary = _Summary(since=now)
            self._last_warning = float("-inf")
        elif now - self._last_warning >= self.warn_interval_s and not self._summary.empty():
            lines.append((logging.WARNING, self._warning(now, entering=False)))
        return lines

    def _warning(self, now: float, *, entering: bool) -> str:
        s = self._summary
        self._last_warning = now
        self._summary = _Summary(since=now)
        span = max(now - s.since, 0.0)
        failed = sum(s.failures.values())
        by = ", ".join(f"{op} {what}: {n}" for (op, what), n in s.failures.most_common(6))
        parts = [
            f"{self.name} is degraded: " if entering else f"{self.name} is still degraded: ",
            f"{failed} failed requests in the last {span:.0f} s" + (f" ({by})" if by else ""),
            f"; {s.retries} retries",
            f"; {s.failed_calls} of {s.calls} calls failed after retries",
        ]
        if s.slowest[0]:
            parts.append(f"; slowest {s.slowest[1]} {s.slowest[0] * 1000:.0f} ms")
        if self.last_error:
            parts.append(f"; last error: {self.last_error}")
        return "".join(parts)

    def _emit(self, lines: list[tuple[int, str]]) -> None:
        for level, msg in lines:
            self._log.log(level, msg)

    def check(self) -> None:
        """Evaluate the state now (logs a due warning or the recovery)."""
        with self._lock:
            lines = self._evaluate(self._clock())
        self._emit(lines)

    @property
    def degraded(self) -> bool:
        """The state as last evaluated (cheap: no lock, for hot paths)."""
        return self._degraded

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            now = self._clock()
            lines = self._evaluate(now)
            attempts, failed, failed_calls, slow, slowest = self._window(now)
            snap = HealthSnapshot(
                state="degraded" if self._degraded else "healthy",
                since=self._since_wall,
                window_s=self.window_s,
                attempts_in_window=attempts,
                failures_in_window=failed + failed_calls,
                slow_calls_in_window=slow,
                error_rate=failed / attempts if attempts else 0.0,
                slowest_s_in_window=slowest,
                last_error=self.last_error,
                last_error_at=self.last_error_at,
            )
        self._emit(lines)
        return snap

    # --- metrics ----------------------------------------------------------------------
    def metrics_text(self, prefix: str = "tidelake_object_store") -> list[str]:
        """Prometheus text exposition lines of the counters, histograms and state."""
        snap = self.snapshot()
        with self._lock:
            calls = sorted(self.calls.items())
            failed = sorted(self.failed_attempts.items())
            retries = sorted(self.retries.items())
            latency = sorted((op, h.cumulative(), h.total, h.n) for op, h in self.latency.items())
        out = [
            f"# HELP {prefix}_requests_total Object store requests (retries included) by outcome.",
            f"# TYPE {prefix}_requests_total counter",
        ]
        out += [
            f'{prefix}_requests_total{{operation="{op}",outcome="{outcome}"}} {n}'
            for (op, outcome), n in calls
        ]
        out += [
            f"# HELP {prefix}_failed_attempts_total Failed attempts (each may be retried) "
            "by operation and failure.",
            f"# TYPE {prefix}_failed_attempts_total counter",
        ]
        out += [
            f'{prefix}_failed_attempts_total{{operation="{op}",failure="{_label(what)}"}} {n}'
            for (op, what), n in failed
        ]
        out += [
            f"# HELP {prefix}_retries_total Attempts retried by the S3 client.",
            f"# TYPE {prefix}_retries_total counter",
        ]
        out += [f'{prefix}_retries_total{{operation="{op}"}} {n}' for op, n in retries]
        out += [
            f"# HELP {prefix}_request_seconds Object store request latency, retries included.",
            f"# TYPE {prefix}_request_seconds histogram",
        ]
        for op, buckets, total, n in latency:
            for bound, acc in buckets:
                le = "+Inf" if bound == float("inf") else repr(bound)
                out.append(f'{prefix}_request_seconds_bucket{{operation="{op}",le="{le}"}} {acc}')
            out.append(f'{prefix}_request_seconds_sum{{operation="{op}"}} {total:.6f}')
            out.append(f'{prefix}_request_seconds_count{{operation="{op}"}} {n}')
        out += [
            f"# HELP {prefix}_degraded 1 while the object store is degraded (failing or slow).",
            f"# TYPE {prefix}_degraded gauge",
            f"{prefix}_degraded {int(snap.degraded)}",
            f"# HELP {prefix}_error_rate Failed attempts / attempts over the last "
            f"{self.window_s:.0f} s.",
            f"# TYPE {prefix}_error_rate gauge",
            f"{prefix}_error_rate {snap.error_rate:.6f}",
        ]
        return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
