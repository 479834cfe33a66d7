"""Balancing by traffic: which partitions to move, as a pure function of what
the controller sees (no I/O; :mod:`ingest.cluster.member` reads the brokers,
assignments and load reports from the store and carries the answer out).

A broker's load is the sum of produce and fetch bytes/s of the partitions
it leads (or is about to lead, for a move in flight), as reported by each
partition's current leader. When a live, non-draining broker's load stays
above ``mean * (1 + margin)`` for ``window_ms``, its hottest partitions go
to the least loaded brokers (same rack first when its rack has another
broker), each move only if it *fits*: the target after the move stays
cooler than the source was before it (``target + x < source``). Every such
move lowers the sum of squared broker loads (by ``2x(source - target - x)``),
so with steady traffic no sequence of moves can come back to where it
started: nothing moves back and forth, and a partition hotter than the gap
between two brokers stays where it is. A partition
moved is not moved again for ``cooldown_ms``; after any move, nothing more
is planned for ``settle_ms`` (the new leaders must report the moved
partitions first); at most ``max_moves`` are in flight.

Traffic decides only when there is some: with a mean load under
``min_bytes_per_s`` per broker, :func:`plan_by_traffic` answers ``active =
False`` and the controller evens out partition counts instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ingest.cluster.api import BrokerInfo, BrokerLoad, PartitionAssignment
from ingest.cluster.planner import Target

__all__ = [
    "BalancerMemory",
    "BalancerSettings",
    "TrafficPlan",
    "broker_loads",
    "format_rate",
    "plan_by_traffic",
]

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class BalancerSettings:
    margin: float  # 0.2: a broker more than 20 % above the mean is overloaded
    window_ms: int  # ... when it stays so this long
    max_moves: int  # balancing moves in flight at once
    cooldown_ms: int  # a moved partition stays put this long
    settle_ms: int  # after a move, wait this long for fresh load reports
    min_bytes_per_s: float  # under this mean load per broker, counts decide


@dataclass(frozen=True, slots=True)
class BalancerMemory:
    """What the balancer remembers between passes (store clock ms)."""

    over_since: Mapping[int, int] = field(default_factory=dict)  # node -> over the margin since
    moved_at: Mapping[Key, int] = field(default_factory=dict)  # partition -> last move


@dataclass(frozen=True, slots=True)
class TrafficPlan:
    targets: list[Target]
    memory: BalancerMemory
    active: bool  # traffic decided (else: too little traffic, balance counts)
    loads: dict[int, float]  # bytes/s per eligible broker, before the moves


def format_rate(bps: float) -> str:
    """``12.3 MB/s``, ``850 kB/s``, ``12 B/s`` (decimal units)."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.1f} {unit}" if bps < 100 * scale else f"{bps / scale:.0f} {unit}"
    return f"{bps:.0f} B/s"


def _partition_loads(
    assignments: Sequence[PartitionAssignment], reports: Mapping[int, BrokerLoad]
) -> dict[Key, float]:
    """Bytes/s of each partition, as its current leader reported it (0 if not yet)."""
    out: dict[Key, float] = {}
    for a in assignments:
        report = reports.get(a.leader)
        load = report.partitions.get((a.topic, a.partition)) if report is not None else None
        out[(a.topic, a.partition)] = 0.0 if load is None else load.total
    return out


def broker_loads(
    nodes: Sequence[int],
    assignments: Sequence[PartitionAssignment],
    reports: Mapping[int, BrokerLoad],
) -> dict[int, float]:
    """Bytes/s per node of ``nodes``: the partitions it leads, or will lead
    once a move in flight completes."""
    per_partition = _partition_loads(assignments, reports)
    loads = dict.fromkeys(nodes, 0.0)
    for a in assignments:
        owner = a.target if a.target is not None else a.leader
        if owner in loads:
            loads[owner] += per_partition[(a.topic, a.partition)]
    return loads


def plan_by_traffic(
    brokers: Sequence[BrokerInfo],
    assignments: Sequence[PartitionAssignment],
    reports: Mapping[int, BrokerLoad],
    memory: BalancerMemory,
    now_ms: int,
    settings: BalancerSettings,
) -> TrafficPlan:
    """The moves that bring overloaded brokers back towards the mean."""
    eligible = sorted(b.node_id for b in brokers if b.live(now_ms) and not b.draining)
    racks = {b.node_id: b.rack for b in brokers}
    moved_at = {k: t for k, t in memory.moved_at.items() if now_ms - t < settings.cooldown_ms}
    loads = broker_loads(eligible, assignments, reports)
    if len(eligible) < 2:
        return TrafficPlan([], BalancerMemory({}, moved_at), False, loads)
    mean = sum(loads.values()) / len(eligible)
    if mean < settings.min_bytes_per_s:
        return TrafficPlan([], BalancerMemory({}, moved_at), False, loads)
    limit = mean * (1 + settings.margin)
    over_since = {n: memory.over_since.get(n, now_ms) for n in eligible if loads[n] > limit}
    in_flight = sum(1 for a in assignments if a.target is not None and a.target != a.leader)
    budget = settings.max_moves - in_flight
    settling = any(now_ms - t < settings.settle_ms for t in moved_at.values())
    hot = sorted(
        (n for n, since in over_since.items() if now_ms - since >= settings.window_ms),
        key=lambda n: (-loads[n], n),
    )
    if budget <= 0 or settling or in_flight or not hot:
        return TrafficPlan([], BalancerMemory(over_since, moved_at), True, loads)
    per_partition = _partition_loads(assignments, reports)
    planned = dict(loads)
    targets: list[Target] = []
    for source in hot:
        candidates = sorted(
            (
                a
                for a in assignments
                if a.leader == source
                and a.target is None
                and (a.topic, a.partition) not in moved_at
                and per_partition[(a.topic, a.partition)] > 0
            ),
            key=lambda a: (-per_partition[(a.topic, a.partition)], a.topic, a.partition),
        )
        for a in candidates:
            if len(targets) >= budget or planned[source] <= limit:
                break
            key = (a.topic, a.partition)
            size = per_partition[key]
            target = _pick_target(source, size, eligible, racks, planned)
            if target is None:
                continue
            reason = (
                f"node {source} at {format_rate(loads[source])} is "
                f"{loads[source] / mean:.1f}x the mean {format_rate(mean)} for "
                f"{(now_ms - over_since[source]) / 1000:.0f} s: moving {a.topic}-{a.partition} "
                f"({format_rate(size)}) to node {target}"
            )
            targets.append(Target(a.topic, a.partition, target, reason))
            planned[source] -= size
            planned[target] += size
            moved_at[key] = now_ms
    return TrafficPlan(targets, BalancerMemory(over_since, moved_at), True, loads)


def _pick_target(
    source: int,
    size: float,
    eligible: Sequence[int],
    racks: Mapping[int, str | None],
    planned: Mapping[int, float],
) -> int | None:
    """The least loaded broker the partition fits on (cooler after the move
    than the source before it), same rack as the source first when it has one."""
    others = [n for n in eligible if n != source]
    rack = racks.get(source)
    same = [n for n in others if rack is not None and racks.get(n) == rack]
    for group in (same, [n for n in others if n not in same]):
        for node in sorted(group, key=lambda n: (planned[n], n)):
            if planned[node] + size < planned[source]:
                return node
    return None
