"""Partitions an operator placed: evening out counts leaves them where they are.

An AlterPartitionReassignments request moves a partition's leadership
through the store just as the controller's own moves do. Left alone, the
next controller pass that evens out partition counts (an idle cluster) could
pick the very partition the operator had just placed, and move it away again
(seen: a move undone 33 ms after it landed). The controller tells the moves
apart by what it asked for itself: a leader epoch that advanced without a
move of its own (a balancing request, or a failover it applied) was asked
for by someone else, and that partition is not moved to even out counts for
the balancer's cooldown. Balancing by traffic still moves it when its
broker runs hot (:mod:`ingest.cluster.balancer`), and a draining broker still
gives it away: real load and an operator's drain outrank an old placement.

A new controller starts from the epochs it first sees and knows no pins:
an operator's move made before it took over may be balanced at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ingest.cluster.api import PartitionAssignment

__all__ = ["PlacementPins"]

Key = tuple[str, int]


class PlacementPins:
    def __init__(self, cooldown_ms: int) -> None:
        self.cooldown_ms = cooldown_ms
        self._epochs: dict[Key, int] = {}  # the leader epoch seen at the last pass
        self._own: dict[Key, int] = {}  # moves this controller asked for -> epoch then
        self._pinned: dict[Key, int] = {}  # operator moves -> when seen (store ms)

    def own(self, topic: str, partition: int) -> None:
        """This controller is moving the partition (balancing or failover)."""
        key = (topic, partition)
        self._own[key] = self._epochs.get(key, -1)

    def observe(self, assignments: Iterable[PartitionAssignment], now_ms: int) -> Mapping[Key, int]:
        """Take in this pass's assignments; the pinned partitions and since
        when (store ms), those within the cooldown only."""
        seen: dict[Key, int] = {}
        for a in assignments:
            key = (a.topic, a.partition)
            before = self._epochs.get(key)
            if before is not None and a.leader_epoch != before:
                if key in self._own:
                    del self._own[key]
                else:
                    self._pinned[key] = now_ms
            seen[key] = a.leader_epoch
        self._epochs = seen
        self._own = {k: e for k, e in self._own.items() if k in seen}
        self._pinned = {
            k: t for k, t in self._pinned.items() if k in seen and now_ms - t < self.cooldown_ms
        }
        return dict(self._pinned)
