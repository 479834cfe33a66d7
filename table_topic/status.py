"""Per-topic table status: lag, freshness, throughput, files per commit, dead letters, errors."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TopicStatus"]

_RATE_WINDOW_S = 60.0


@dataclass
class TopicStatus:
    topic: str
    table: str
    state: str = "starting"  # starting | running | error | stopped
    committed: dict[int, int] = field(default_factory=dict)  # partition -> next offset in the table
    commits: int = 0
    rows_committed: int = 0
    rows_deleted: int = 0
    dead_letters: int = 0
    last_commit_at: float | None = None
    last_commit_rows: int = 0
    last_commit_files: int = 0
    files_per_commit: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    newest_committed_timestamp_ms: int = -1
    last_error: str | None = None
    last_error_at: float | None = None
    offsets_skipped: int = 0
    commit_seconds_sum: float = 0.0  # time spent in table commits (with commits: the mean)
    last_commit_seconds: float | None = None
    format: str = "iceberg"  # table.topic.format: iceberg | delta | both
    _rate: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=1000))

    def record_commit(
        self,
        rows: int,
        files: int,
        deleted: int,
        newest_ts: int,
        offsets: dict[int, int],
        seconds: float | None = None,
    ) -> None:
        now = time.time()
        self.commits += 1
        if seconds is not None:
            self.commit_seconds_sum += seconds
            self.last_commit_seconds = seconds
        self.rows_committed += rows
        self.rows_deleted += deleted
        self.last_commit_at = now
        self.last_commit_rows = rows
        self.last_commit_files = files
        self.files_per_commit.append(files)
        self.newest_committed_timestamp_ms = max(self.newest_committed_timestamp_ms, newest_ts)
        self.committed = dict(offsets)
        self._rate.append((now, rows))
        self.state = "running"

    def record_error(self, message: str) -> None:
        self.last_error = message
        self.last_error_at = time.time()
        self.state = "error"

    def rows_per_second(self) -> float:
        now = time.time()
        recent = [(t, n) for t, n in self._rate if now - t <= _RATE_WINDOW_S]
        if not recent:
            return 0.0
        span = max(now - recent[0][0], 1.0)
        return sum(n for _, n in recent) / span

    def to_dict(self, high_watermarks: dict[int, int]) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        lag = {p: max(0, hw - self.committed.get(p, 0)) for p, hw in high_watermarks.items()}
        files = list(self.files_per_commit)
        return {
            "topic": self.topic,
            "table": self.table,
            "format": self.format,
            "state": self.state,
            "lag": sum(lag.values()),
            "lag_by_partition": lag,
            "committed_offsets": dict(self.committed),
            "freshness_ms": (
                now_ms - self.newest_committed_timestamp_ms
                if self.newest_committed_timestamp_ms >= 0
                else None
            ),
            "rows_per_second": round(self.rows_per_second(), 1),
            "rows_committed": self.rows_committed,
            "rows_deleted": self.rows_deleted,
            "commits": self.commits,
            "last_commit_at": self.last_commit_at,
            "last_commit_rows": self.last_commit_rows,
            "files_per_commit": (sum(files) / len(files)) if files else None,
            "last_commit_files": self.last_commit_files,
            "commit_seconds_sum": round(self.commit_seconds_sum, 6),
            "last_commit_seconds": (
                round(self.last_commit_seconds, 6) if self.last_commit_seconds is not None else None
            ),
            "dead_letters": self.dead_letters,
            "offsets_skipped": self.offsets_skipped,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }
