"""What the log cleaner remembers of a partition between passes.

Kept in the metadata store's key/value table under ``log-cleaner.<stream
id>`` as JSON, written after each pass (a pass whose state was lost is only
done again: its tombstones then count as seen later, so they live longer,
never shorter).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CleanerState", "CleanedRange", "CheckpointStore", "state_key"]

_MAX_PRODUCERS = 10_000  # producers whose last batch is remembered (the newest)


class CheckpointStore(Protocol):
    """Where the cleaner keeps its state (the metadata store implements it)."""

    def get_kv(self, key: str) -> str | None: ...

    def put_kv(self, key: str, value: str) -> None: ...


def state_key(stream_id: int) -> str:
    return f"log-cleaner.{stream_id}"


@dataclass(slots=True)
class CleanedRange:
    """Offsets ``[start, end)`` first cleaned at ``seen_ms``, with tombstones
    or transaction markers still in them (only such ranges are kept)."""

    start: int
    end: int
    seen_ms: int


@dataclass(slots=True)
class CleanerState:
    clean_offset: int = 0
    """Everything below was cleaned: the dirty part starts here."""
    expired_below: int = 0
    """Tombstones and markers below this offset are past delete.retention.ms."""
    ranges: list[CleanedRange] = field(default_factory=list)
    producers: dict[int, int] = field(default_factory=dict)
    """Producer id -> base offset of its last data batch in the cleaned part:
    that batch is kept (empty if need be) so idempotent producers keep their
    sequence state, as Kafka's cleaner keeps it."""

    def expired(self, offset: int, now_ms: int, retention_ms: int) -> bool:
        """A tombstone or marker at ``offset`` (in the cleaned part) is past
        its delete.retention.ms."""
        if offset < self.expired_below:
            return True
        for r in self.ranges:
            if r.start <= offset < r.end:
                return r.seen_ms + retention_ms <= now_ms
        return False

    def expiring(self, now_ms: int, retention_ms: int) -> bool:
        """Some tombstone or marker has passed delete.retention.ms."""
        return any(r.seen_ms + retention_ms <= now_ms for r in self.ranges)

    def after_pass(
        self,
        start: int,
        end: int,
        now_ms: int,
        retention_ms: int,
        kept_markers: bool,
        producers: dict[int, int],
        log_start: int,
    ) -> None:
        """Record a pass that cleaned everything below ``end`` at ``now_ms``
        and took the dirty part ``[start, end)`` in (with tombstones or
        markers kept there: ``kept_markers``)."""
        keep: list[CleanedRange] = []
        for r in self.ranges:
            if r.seen_ms + retention_ms <= now_ms:
                self.expired_below = max(self.expired_below, r.end)  # dropped by this pass
            else:
                keep.append(r)
        if kept_markers and end > start:
            keep.append(CleanedRange(start, end, now_ms))
        self.ranges = keep
        self.clean_offset = max(self.clean_offset, end)
        live = {p: o for p, o in producers.items() if o >= log_start}
        if len(live) > _MAX_PRODUCERS:
            newest = sorted(live.items(), key=lambda kv: kv[1])[-_MAX_PRODUCERS:]
            live = dict(newest)
        self.producers = live

    def to_json(self) -> str:
        return json.dumps(
            {
                "clean_offset": self.clean_offset,
                "expired_below": self.expired_below,
                "ranges": [[r.start, r.end, r.seen_ms] for r in self.ranges],
                "producers": {str(p): o for p, o in self.producers.items()},
            }
        )

    @classmethod
    def from_json(cls, text: str | None) -> CleanerState:
        if not text:
            return cls()
        raw = json.loads(text)
        return cls(
            int(raw.get("clean_offset", 0)),
            int(raw.get("expired_below", 0)),
            [CleanedRange(int(a), int(b), int(c)) for a, b, c in raw.get("ranges", [])],
            {int(p): int(o) for p, o in raw.get("producers", {}).items()},
        )
