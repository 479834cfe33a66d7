"""Balancing by traffic (ingest.cluster.balancer): who moves what, when, and
what never moves."""

from __future__ import annotations

from collections.abc import Mapping

from ingest.cluster.api import BrokerInfo, BrokerLoad, PartitionAssignment, PartitionLoad
from ingest.cluster.balancer import (
    BalancerMemory,
    BalancerSettings,
    TrafficPlan,
    broker_loads,
    plan_by_traffic,
)

NOW = 10_000_000
MB = 1_000_000.0
SETTINGS = BalancerSettings(
    margin=0.2,
    window_ms=30_000,
    max_moves=4,
    cooldown_ms=120_000,
    settle_ms=7_000,
    min_bytes_per_s=100_000,
)


def broker(node: int, rack: str | None = None, *, draining: bool = False) -> BrokerInfo:
    return BrokerInfo(
        node, node, "127.0.0.1", 9000 + node, rack, f"n{node}/", draining, NOW + 10**9
    )


class World:
    """Brokers, who leads what, and how hot each partition is (bytes/s, produce only)."""

    def __init__(
        self, brokers: list[BrokerInfo], parts: Mapping[tuple[str, int], tuple[int, float]]
    ):
        self.brokers = brokers
        self.leader = {k: v[0] for k, v in parts.items()}
        self.heat = {k: v[1] for k, v in parts.items()}
        self.epochs = dict.fromkeys(parts, 0)

    def assignments(self) -> list[PartitionAssignment]:
        return [
            PartitionAssignment(t, p, self.leader[(t, p)], self.epochs[(t, p)])
            for t, p in sorted(self.leader)
        ]

    def reports(self) -> dict[int, BrokerLoad]:
        out: dict[int, dict[tuple[str, int], PartitionLoad]] = {b.node_id: {} for b in self.brokers}
        for k, node in self.leader.items():
            out[node][k] = PartitionLoad(self.heat[k] * 0.75, self.heat[k] * 0.25)
        return {n: BrokerLoad(n, NOW, parts) for n, parts in out.items()}

    def loads(self) -> dict[int, float]:
        return broker_loads([b.node_id for b in self.brokers], self.assignments(), self.reports())

    def plan(
        self, memory: BalancerMemory, now: int, settings: BalancerSettings = SETTINGS
    ) -> TrafficPlan:
        return plan_by_traffic(
            self.brokers, self.assignments(), self.reports(), memory, now, settings
        )

    def apply(self, plan: TrafficPlan) -> None:
        for t in plan.targets:
            self.leader[(t.topic, t.partition)] = t.target
            self.epochs[(t.topic, t.partition)] += 1

    def run(self, seconds: int, step_s: int = 5) -> list[TrafficPlan]:
        """Plan every ``step_s`` and carry each plan out at once."""
        memory = BalancerMemory()
        plans = []
        for i in range(0, seconds * 1000, step_s * 1000):
            plan = self.plan(memory, NOW + i)
            memory = plan.memory
            self.apply(plan)
            plans.append(plan)
        return plans


def skewed() -> World:
    # node 1 leads all six partitions of a hot topic; 2 and 3 lead quiet ones
    parts: dict[tuple[str, int], tuple[int, float]] = {
        ("hot", i): (1, 3 * MB - i * 0.1 * MB) for i in range(6)
    }
    parts |= {("quiet", i): (2 + i % 2, 0.2 * MB) for i in range(4)}
    return World([broker(1), broker(2), broker(3)], parts)


def test_a_skewed_broker_gives_its_hottest_partitions_to_the_least_loaded_after_the_window() -> (
    None
):
    world = skewed()
    first = world.plan(BalancerMemory(), NOW)
    assert first.active and first.targets == []  # over the margin, but not for long enough
    assert 1 in first.memory.over_since
    early = world.plan(first.memory, NOW + 29_000)
    assert early.targets == []
    plan = world.plan(early.memory, NOW + 30_000)
    assert plan.targets, plan
    hottest = sorted(world.heat, key=lambda k: -world.heat[k])
    moved = [(t.topic, t.partition) for t in plan.targets]
    assert all(world.leader[k] == 1 for k in moved)
    assert moved == [k for k in hottest if k in moved]  # hottest first
    assert moved[0] == ("hot", 0)
    assert {t.target for t in plan.targets} == {2, 3}
    assert "node 1 at" in plan.targets[0].reason and "the mean" in plan.targets[0].reason
    assert "for 30 s: moving hot-0 (3.0 MB/s) to node" in plan.targets[0].reason


def test_skew_ends_under_the_margin_and_then_nothing_moves_any_more() -> None:
    world = skewed()
    plans = world.run(600)
    loads = world.loads()
    mean = sum(loads.values()) / 3
    assert max(loads.values()) <= mean * 1.2, loads
    moves = [t for p in plans for t in p.targets]
    assert len(moves) <= 6
    last_move = max(i for i, p in enumerate(plans) if p.targets)
    assert last_move * 5 < 120  # balanced within two minutes of 5 s passes
    assert all(not p.targets for p in plans[last_move + 1 :])


def test_a_balanced_load_over_many_windows_moves_nothing() -> None:
    parts = {("t", i): (1 + i % 3, (1 + (i % 2) * 0.3) * MB) for i in range(12)}
    world = World([broker(1), broker(2), broker(3)], parts)
    plans = world.run(600, step_s=1)
    assert all(p.active for p in plans)
    assert [t for p in plans for t in p.targets] == []


def test_a_partition_hotter_than_the_gap_is_never_moved_back_and_forth() -> None:
    # node 1: one 10 MB/s partition; node 2: 4 MB/s. Moving it makes node 2 the
    # hot one (14 vs 0): it stays, for ever
    world = World([broker(1), broker(2)], {("big", 0): (1, 10 * MB), ("small", 0): (2, 4 * MB)})
    plans = world.run(3600)
    assert [t for p in plans for t in p.targets] == []
    assert world.leader == {("big", 0): 1, ("small", 0): 2}


def test_a_move_never_makes_the_target_hotter_than_the_source() -> None:
    # node 1: 9 + 4 MB/s, node 2: 5 MB/s, node 3: 6 MB/s. The 9 would make any
    # target hotter than node 1's 13; the 4 fits on node 2 (9 < 13)
    world = World(
        [broker(1), broker(2), broker(3)],
        {
            ("a", 0): (1, 9 * MB),
            ("a", 1): (1, 4 * MB),
            ("b", 0): (2, 5 * MB),
            ("c", 0): (3, 6 * MB),
        },
    )
    settings = BalancerSettings(0.2, 0, 4, 120_000, 7_000, 100_000)
    plan = world.plan(BalancerMemory(), NOW, settings)
    assert [(t.topic, t.partition, t.target) for t in plan.targets] == [("a", 1, 2)]


def test_at_most_max_moves_at_once_and_none_while_moves_are_in_flight() -> None:
    parts = {("hot", i): (1, 1 * MB) for i in range(12)}
    world = World([broker(1), broker(2), broker(3)], parts)
    settings = BalancerSettings(0.2, 0, 3, 120_000, 7_000, 100_000)
    plan = world.plan(BalancerMemory(), NOW, settings)
    assert len(plan.targets) == 3
    # one of them still in flight: a plan made then proposes nothing
    t = plan.targets[0]
    in_flight = [
        PartitionAssignment(a.topic, a.partition, a.leader, a.leader_epoch, t.target)
        if (a.topic, a.partition) == (t.topic, t.partition)
        else a
        for a in world.assignments()
    ]
    again = plan_by_traffic(
        world.brokers, in_flight, world.reports(), plan.memory, NOW + 60_000, settings
    )
    assert again.targets == []


def test_a_moved_partition_waits_for_the_cool_down_and_plans_wait_to_settle() -> None:
    world = World([broker(1), broker(2)], {("a", 0): (1, 5 * MB), ("a", 1): (1, 1 * MB)})
    settings = BalancerSettings(0.2, 0, 4, 60_000, 7_000, 100_000)
    plan = world.plan(BalancerMemory(), NOW, settings)
    assert [(t.topic, t.partition, t.target) for t in plan.targets] == [("a", 0, 2)]
    world.apply(plan)
    # node 2 gets busier (c-0): it is over the margin, and a-0 is its hottest
    world.leader[("c", 0)] = 2
    world.heat[("c", 0)] = 3 * MB
    world.epochs[("c", 0)] = 0
    memory = plan.memory
    for now in range(NOW + 1_000, NOW + 7_000, 1_000):
        p = world.plan(memory, now, settings)
        memory = p.memory
        assert p.targets == [], (now - NOW, p.targets)  # waiting for fresh reports
    p = world.plan(memory, NOW + 7_000, settings)
    # a-0 is cooling down: c-0 goes instead
    assert [(t.topic, t.partition, t.target) for t in p.targets] == [("c", 0, 1)]
    # once the cool-down is over, a-0 may move again
    later = world.plan(plan.memory, NOW + 60_000, settings)
    assert [(t.topic, t.partition, t.target) for t in later.targets] == [("a", 0, 1)]


def test_the_same_rack_is_preferred_when_the_source_rack_has_another_broker() -> None:
    brokers = [broker(1, "a"), broker(2, "a"), broker(3, "b"), broker(4, "b")]
    parts = {("hot", i): (1, 2 * MB) for i in range(4)}
    parts |= {("warm", 0): (2, 3 * MB), ("warm", 1): (3, 1 * MB), ("warm", 2): (4, 1 * MB)}
    world = World(brokers, parts)
    settings = BalancerSettings(0.2, 0, 1, 120_000, 7_000, 100_000)
    plan = world.plan(BalancerMemory(), NOW, settings)
    # node 2 (rack a, 3 MB/s) is busier than 3 and 4 (1 MB/s) but shares node 1's rack
    assert [(t.topic, t.partition, t.target) for t in plan.targets] == [("hot", 0, 2)]
    # a broker alone in its rack gives to the least loaded anywhere
    solo = World(
        [broker(1, "a"), broker(2, "b"), broker(3, "c")],
        {("hot", 0): (1, 3 * MB), ("hot", 1): (1, 3 * MB), ("x", 0): (2, 1 * MB)},
    )
    plan = solo.plan(BalancerMemory(), NOW, settings)
    assert [(t.topic, t.partition, t.target) for t in plan.targets] == [("hot", 0, 3)]


def test_too_little_traffic_leaves_the_decision_to_partition_counts() -> None:
    world = World([broker(1), broker(2)], {("t", i): (1, 10_000.0) for i in range(4)})
    plan = world.plan(BalancerMemory(), NOW)
    assert not plan.active and plan.targets == []


def test_a_new_empty_broker_in_a_loaded_cluster_takes_traffic() -> None:
    parts = {("t", i): (1 + i % 2, 1 * MB) for i in range(8)}
    world = World([broker(1), broker(2), broker(3)], parts)  # node 3 just joined
    world.run(60)
    loads = world.loads()
    assert loads[3] >= 2 * MB, loads
    assert max(loads.values()) <= 1.2 * sum(loads.values()) / 3


def test_draining_and_dead_brokers_are_neither_sources_nor_targets() -> None:
    brokers = [broker(1), broker(2), broker(3, draining=True)]
    parts = {("t", i): (1, 1 * MB) for i in range(4)} | {("d", 0): (3, 5 * MB)}
    world = World(brokers, parts)
    plan = world.plan(BalancerMemory(), NOW, BalancerSettings(0.2, 0, 4, 1, 0, 1))
    assert {t.target for t in plan.targets} == {2}
    assert all(t.topic == "t" for t in plan.targets)
