"""A latency histogram the storage parts keep themselves and metrics read at
scrape time (no metrics library on the hot path, and none inside ``ingest``).

``observe`` is a bisect and two additions, cheap enough for the WAL writer's
every group commit. One thread observes and another reads: under the GIL a
reader may see a count one behind the sum, which a scrape tolerates.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["FINE_BUCKETS", "LatencyHistogram"]

# sub-millisecond resolution where a produce's durable write lives, up to
# the seconds a stalled disk takes
FINE_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5,
)  # fmt: skip


class LatencyHistogram:
    """Counts of observations per bucket (upper bounds in seconds, ascending),
    the last one counting those above every bound, plus their sum and number."""

    __slots__ = ("bounds", "counts", "total", "n")

    def __init__(self, bounds: Sequence[float] = FINE_BUCKETS) -> None:
        if list(bounds) != sorted(set(bounds)) or not bounds:
            raise ValueError("bucket bounds must be distinct and ascending")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds
        self.n += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it) per bucket, ending with +inf."""
        out: list[tuple[float, int]] = []
        acc = 0
        for bound, c in zip((*self.bounds, float("inf")), list(self.counts), strict=True):
            acc += c
            out.append((bound, acc))
        return out
