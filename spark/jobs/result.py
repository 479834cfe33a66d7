"""What a maintenance job did to one table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["JobResult"]


@dataclass(frozen=True)
class JobResult:
    """One job run on one table: the procedure's counters, files it listed, wall time."""

    job: str
    table: str
    metrics: dict[str, int] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    seconds: float = 0.0
    skipped: str | None = None  # why nothing ran, if nothing did

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "table": self.table,
            "metrics": dict(self.metrics),
            "files": list(self.files),
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
        }
