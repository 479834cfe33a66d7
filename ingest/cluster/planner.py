"""What the controller decides, as pure functions of what it sees.

No I/O here: the controller (:mod:`ingest.cluster.controller`) reads the
brokers and assignments from the :class:`~ingest.cluster.api.ClusterStore`,
asks these functions what to change, and writes the answer back with the
store's compare-and-set calls.

- :func:`leaders_for_new` spreads the partitions of a new topic over the
  live brokers, least loaded first.
- :func:`failover_moves` gives every partition whose leader is gone (not
  live, or unassigned) to the least loaded live broker that is not draining.
- :func:`balance_targets` asks the most loaded brokers to hand partitions to
  the least loaded ones, when the partition counts differ by more than one
  (count-based, for an idle cluster; traffic decides in
  :mod:`ingest.cluster.balancer` when there is traffic), and asks draining
  brokers to hand everything away.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ingest.cluster.api import NO_LEADER, BrokerInfo, Move, PartitionAssignment

__all__ = ["leaders_for_new", "failover_moves", "balance_targets", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    """Ask the leader of ``topic``-``partition`` to hand over to ``target``."""

    topic: str
    partition: int
    target: int
    reason: str = ""


def _loads(eligible: Iterable[int], assignments: Iterable[PartitionAssignment]) -> dict[int, int]:
    """Partitions led (or about to be led, by a pending target) per eligible node."""
    loads = dict.fromkeys(eligible, 0)
    for a in assignments:
        owner = a.target if a.target is not None else a.leader
        if owner in loads:
            loads[owner] += 1
    return loads


def _least_loaded(loads: dict[int, int], count: int) -> list[int]:
    """``count`` picks, each the least loaded node so far (ties by node id)."""
    heap = [(n, node) for node, n in loads.items()]
    heapq.heapify(heap)
    picks: list[int] = []
    for _ in range(count):
        n, node = heapq.heappop(heap)
        picks.append(node)
        heapq.heappush(heap, (n + 1, node))
    return picks


def _eligible(brokers: Sequence[BrokerInfo], now_ms: int) -> list[int]:
    return [b.node_id for b in brokers if b.live(now_ms) and not b.draining]


def leaders_for_new(
    count: int,
    brokers: Sequence[BrokerInfo],
    assignments: Sequence[PartitionAssignment],
    now_ms: int,
) -> list[int]:
    """Leaders for ``count`` new partitions; ``NO_LEADER`` for each when no
    broker can take them (the controller assigns them once one can)."""
    loads = _loads(_eligible(brokers, now_ms), assignments)
    if not loads:
        return [NO_LEADER] * count
    return _least_loaded(loads, count)


def failover_moves(
    brokers: Sequence[BrokerInfo],
    assignments: Sequence[PartitionAssignment],
    now_ms: int,
    recovered: set[int] | frozenset[int] = frozenset(),
) -> list[Move]:
    """Moves for the partitions whose leader is not live.

    A partition led by a dead node moves only once that node's write-ahead
    log has been recovered (its node id is in ``recovered``), so the new
    leader opens the stream after every acknowledged record is in object
    storage. Unassigned partitions (``NO_LEADER``) move at once.
    """
    live = {b.node_id for b in brokers if b.live(now_ms)}
    orphans = [
        a
        for a in assignments
        if a.leader == NO_LEADER or (a.leader not in live and a.leader in recovered)
    ]
    if not orphans:
        return []
    loads = _loads(_eligible(brokers, now_ms), assignments)
    if not loads:
        return []
    picks = _least_loaded(loads, len(orphans))
    return [
        Move(a.topic, a.partition, a.leader_epoch, node)
        for a, node in zip(orphans, picks, strict=True)
    ]


def balance_targets(
    brokers: Sequence[BrokerInfo],
    assignments: Sequence[PartitionAssignment],
    now_ms: int,
    max_moves: int,
    even_counts: bool = True,
    pinned: Collection[tuple[str, int]] = frozenset(),
) -> list[Target]:
    """Hand-overs that even out partition counts (and empty draining brokers;
    only that with ``even_counts=False``, when traffic decides).

    ``pinned`` partitions (an operator just placed them) count where they
    are but are not moved to even counts out; a draining broker still gives
    them away.

    Nothing is proposed while any move is in flight (a partition with a
    target), so the plan is always made from settled counts and never
    oscillates; at most ``max_moves`` targets at a time.
    """
    if max_moves <= 0 or any(a.target is not None for a in assignments):
        return []
    draining = {b.node_id for b in brokers if b.live(now_ms) and b.draining}
    eligible = _eligible(brokers, now_ms)
    if not eligible:
        return []
    loads = _loads(eligible, assignments)
    targets: list[Target] = []
    # draining brokers give everything away
    for a in assignments:
        if len(targets) >= max_moves:
            return targets
        if a.leader in draining:
            node = min(loads, key=lambda n: (loads[n], n))
            loads[node] += 1
            targets.append(Target(a.topic, a.partition, node, f"node {a.leader} is draining"))
    if not even_counts:
        return targets
    # then even out the counts of live, non-draining brokers
    led: dict[int, list[PartitionAssignment]] = {n: [] for n in loads}
    counts = Counter({n: 0 for n in loads})
    for a in assignments:
        if a.leader in led:
            counts[a.leader] += 1
            if (a.topic, a.partition) not in pinned:
                led[a.leader].append(a)
    while len(targets) < max_moves:
        hi = max(counts, key=lambda n: (counts[n], -n))
        lo = min(counts, key=lambda n: (counts[n], n))
        if counts[hi] - counts[lo] <= 1 or not led[hi]:
            break
        reason = f"node {hi} leads {counts[hi]} partitions, node {lo} {counts[lo]}"
        a = led[hi].pop()
        counts[hi] -= 1
        counts[lo] += 1
        targets.append(Target(a.topic, a.partition, lo, reason))
    return targets
