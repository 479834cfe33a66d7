"""One controller pass over the in-memory cluster store: a dead broker's log is
recovered before its partitions move, and a broker that came back is left alone."""

from __future__ import annotations

from ingest.cluster.api import BrokerInfo
from ingest.cluster.config import ClusterConfig
from ingest.cluster.member import ClusterMember
from ingest.cluster.memory import MemoryClusterStore


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Hooks:
    def __init__(self) -> None:
        self.recovered: list[int] = []
        self.led: set[tuple[str, int]] = set()

    async def lead(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.led.add((topic, partition))

    async def resign(self, topic: str, partition: int) -> None:
        self.led.discard((topic, partition))

    async def recover_node(self, broker: BrokerInfo) -> None:
        self.recovered.append(broker.node_id)

    async def topics_changed(self) -> None:
        pass

    def fenced(self, reason: str) -> None:
        raise AssertionError(reason)

    def traffic(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {}


def _member(store: MemoryClusterStore, hooks: Hooks) -> ClusterMember:
    return ClusterMember(
        store,
        ClusterConfig.model_validate({"session_timeout_ms": 3000}),
        node_id=1,
        host="127.0.0.1",
        port=9092,
        rack=None,
        object_prefix="wal/node-1/",
        hooks=hooks,
    )


async def test_a_dead_brokers_log_is_recovered_before_its_partitions_move() -> None:
    clock = Clock()
    store = MemoryClusterStore(now_ms=clock)
    store.register_broker(1, "127.0.0.1", 9092, None, "wal/node-1/", 3000)
    store.register_broker(2, "127.0.0.1", 9093, None, "wal/node-2/", 3000)
    store.assign_new("t", [1, 2, 2])
    hooks = Hooks()
    member = _member(store, hooks)
    clock.ms += 5000  # both leases ran out; node 1 (us) renews, node 2 does not
    store.heartbeat(1, store.list_brokers()[0].incarnation, 3000)
    lease = store.acquire_controller(1, 3000)
    assert lease is not None
    await member.control_once(lease.epoch)
    assert hooks.recovered == [2]
    assert [b.node_id for b in store.list_brokers()] == [1]
    assert {a.partition: a.leader for a in store.assignments()} == {0: 1, 1: 1, 2: 1}
    assert all(a.leader_epoch == 1 for a in store.assignments() if a.partition > 0)


async def test_a_broker_that_restarted_is_not_recovered() -> None:
    clock = Clock()
    store = MemoryClusterStore(now_ms=clock)
    store.register_broker(1, "127.0.0.1", 9092, None, "wal/node-1/", 3000)
    store.register_broker(2, "127.0.0.1", 9093, None, "wal/node-2/", 3000)
    store.assign_new("t", [2])
    hooks = Hooks()
    member = _member(store, hooks)
    clock.ms += 5000
    store.heartbeat(1, store.list_brokers()[0].incarnation, 3000)
    stale = store.list_brokers()  # what the controller saw first
    store.register_broker(2, "127.0.0.1", 9093, None, "wal/node-2/", 3000)  # restarted
    assert not await member._still_expired(stale[1])
    lease = store.acquire_controller(1, 3000)
    assert lease is not None
    await member.control_once(lease.epoch)
    assert hooks.recovered == []
    assert [a.leader for a in store.assignments()] == [2]
