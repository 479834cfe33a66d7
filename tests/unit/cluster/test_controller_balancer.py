"""The controller balances by traffic when brokers report some (decisions kept
with their reason), by partition count when the cluster is idle; each member
reports the bytes/s of the partitions it leads."""

from __future__ import annotations

import asyncio
from typing import Any

from ingest.cluster.api import Move, PartitionAssignment, PartitionLoad
from ingest.cluster.config import ClusterConfig
from ingest.cluster.member import ClusterMember
from ingest.cluster.memory import MemoryClusterStore
from ingest.cluster.pins import PlacementPins
from tests.unit.cluster.test_controller import Hooks

MB = 1_000_000.0


class CountingHooks(Hooks):
    """Partitions led here see ``rate`` bytes/s produced and half that fetched."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate
        self.started = asyncio.get_running_loop().time()

    def traffic(self) -> dict[tuple[str, int], tuple[int, int]]:
        elapsed = asyncio.get_running_loop().time() - self.started
        n = int(self.rate * elapsed)
        return {key: (n, n // 2) for key in self.led}


def _member(store: MemoryClusterStore, hooks: Hooks, **config: Any) -> ClusterMember:
    return ClusterMember(
        store,
        ClusterConfig.model_validate(config),
        node_id=1,
        host="127.0.0.1",
        port=9092,
        rack=None,
        object_prefix="wal/node-1/",
        hooks=hooks,
    )


def _three(store: MemoryClusterStore) -> list[int]:
    return [
        store.register_broker(n, "127.0.0.1", 9091 + n, None, f"wal/node-{n}/", 60_000).incarnation
        for n in (1, 2, 3)
    ]


async def test_a_hot_broker_hands_its_hottest_partitions_to_the_idle_ones() -> None:
    store = MemoryClusterStore()
    incarnations = _three(store)
    store.assign_new("hot", [1, 1, 1, 1, 1, 1])
    store.assign_new("quiet", [2, 3, 2, 3, 2, 3])
    store.report_load(
        1,
        incarnations[0],
        {("hot", i): PartitionLoad((2 + i * 0.1) * MB, 0.5 * MB) for i in range(6)},
    )
    member = _member(store, Hooks(), balancer_window_ms=0, balance_interval_ms=100)
    lease = store.acquire_controller(1, 60_000)
    assert lease is not None
    await member.control_once(lease.epoch)
    targets = {(a.topic, a.partition): a.target for a in store.assignments() if a.target}
    # the hottest first (hot-5 > hot-4 > ...), to nodes 2 and 3, counts untouched elsewhere
    assert set(targets) == {("hot", 5), ("hot", 4), ("hot", 3), ("hot", 2)}
    assert set(targets.values()) == {2, 3}
    decisions = list(member.decisions)
    assert [d["by"] for d in decisions] == ["traffic"] * 4
    assert decisions[0]["topic"] == "hot" and decisions[0]["partition"] == 5
    assert decisions[0]["from"] == 1
    assert decisions[0]["reason"].startswith("node 1 at 16.5 MB/s is 3.0x the mean 5.5 MB/s")
    assert "moving hot-5 (3.0 MB/s) to node" in decisions[0]["reason"]
    status = await member.balancer_status()
    assert status["loads"]["1"]["bytes_in_per_s"] == 13.5 * MB
    assert len(status["decisions"]) == 4


async def test_an_idle_cluster_evens_out_partition_counts() -> None:
    store = MemoryClusterStore()
    _three(store)
    store.assign_new("t", [1, 1, 1, 1, 1, 1])
    member = _member(store, Hooks(), balance_interval_ms=100)
    lease = store.acquire_controller(1, 60_000)
    assert lease is not None
    await member.control_once(lease.epoch)
    targets = [a.target for a in store.assignments() if a.target]
    assert sorted(targets) == [2, 2, 3, 3]
    assert [d["by"] for d in member.decisions] == ["count"] * 4
    assert "node 1 leads 6 partitions" in member.decisions[0]["reason"]


async def test_a_disabled_balancer_moves_nothing() -> None:
    store = MemoryClusterStore()
    incarnations = _three(store)
    store.assign_new("t", [1, 1, 1, 1, 1, 1])
    store.report_load(1, incarnations[0], {("t", i): PartitionLoad(MB, 0) for i in range(6)})
    member = _member(store, Hooks(), balancer=False, balancer_window_ms=0)
    lease = store.acquire_controller(1, 60_000)
    assert lease is not None
    await member.control_once(lease.epoch)
    assert [a for a in store.assignments() if a.target] == []


async def test_a_member_reports_the_bytes_per_second_of_the_partitions_it_leads() -> None:
    store = MemoryClusterStore()
    store.register_broker(2, "127.0.0.1", 9093, None, "wal/node-2/", 60_000)
    store.assign_new("t", [1, 1, 2])
    hooks = CountingHooks(rate=400_000)
    member = _member(store, hooks, load_report_interval_ms=200, balancer=False)
    await member.start()
    try:
        loads = {}
        for _ in range(50):
            await asyncio.sleep(0.1)
            loads = store.loads()
            if 1 in loads and len(loads[1].partitions) == 2:
                break
        report = loads[1].partitions
        assert set(report) == {("t", 0), ("t", 1)}  # t-2 is led by node 2
        for load in report.values():
            assert 300_000 < load.in_bps < 500_000, load
            assert 150_000 < load.out_bps < 250_000, load
    finally:
        await member.stop()


async def test_a_draining_broker_gives_everything_away_while_traffic_decides() -> None:
    store = MemoryClusterStore()
    incarnations = _three(store)
    store.assign_new("t", [1, 2, 3, 3, 3])
    for node, inc in zip((1, 2, 3), incarnations, strict=True):
        store.report_load(
            node,
            inc,
            {
                (a.topic, a.partition): PartitionLoad(MB, 0)
                for a in store.assignments()
                if a.leader == node
            },
        )
    store.set_draining(3, incarnations[2], True)
    member = _member(store, Hooks(), balancer_window_ms=0)
    lease = store.acquire_controller(1, 60_000)
    assert lease is not None
    await member.control_once(lease.epoch)
    targets = {a.partition: a.target for a in store.assignments() if a.target is not None}
    assert set(targets) == {2, 3, 4} and set(targets.values()) <= {1, 2}
    assert all("node 3 is draining" in d["reason"] for d in member.decisions)


async def test_a_partition_an_operator_just_placed_stays_where_it_was_put() -> None:
    """Balancing counts picks other partitions than the ones a reassignment
    just moved; once the cooldown is over they may move again."""
    store = MemoryClusterStore()
    _three(store)
    store.assign_new("t", [1, 2, 3, 1, 2, 3])
    member = _member(store, Hooks(), balance_interval_ms=100, balancer_cooldown_ms=60_000)
    lease = store.acquire_controller(1, 60_000)
    assert lease is not None
    await member.control_once(lease.epoch)  # even: nothing to do
    assert [a for a in store.assignments() if a.target] == []
    # an operator puts t-1 (node 2) and t-2 (node 3) on node 1, which now leads 4
    epochs = {a.partition: a.leader_epoch for a in store.assignments()}
    store.apply_moves(lease.epoch, [Move("t", 1, epochs[1], 1), Move("t", 2, epochs[2], 1)])
    await asyncio.sleep(0.11)  # the next balancing pass is due
    await member.control_once(lease.epoch)
    moved = {a.partition: a.target for a in store.assignments() if a.target is not None}
    assert moved and set(moved) <= {0, 3}, moved  # never the operator's t-1 or t-2
    assert {n for n in moved.values()} <= {2, 3}


def test_pins_are_the_moves_the_controller_did_not_ask_for() -> None:
    pins = PlacementPins(cooldown_ms=1_000)

    def layout(*epochs: int) -> list[PartitionAssignment]:
        return [PartitionAssignment("t", p, 1, e) for p, e in enumerate(epochs)]

    assert pins.observe(layout(0, 0, 0), now_ms=0) == {}  # what a new controller sees first
    pins.own("t", 0)  # a balancing move of its own
    assert pins.observe(layout(1, 1, 0), now_ms=100) == {("t", 1): 100}
    assert pins.observe(layout(1, 1, 0), now_ms=1_099) == {("t", 1): 100}
    assert pins.observe(layout(1, 1, 0), now_ms=1_100) == {}  # the cooldown is over
    assert pins.observe(layout(1, 2), now_ms=1_200) == {("t", 1): 1_200}  # t-2 deleted
