"""A broker's view of leaders is no older than the request that reads it:
Metadata refreshes it from the store first, and no read of the store takes a
partition back to an earlier leader epoch than a hand-over this broker made."""

from __future__ import annotations

from ingest.cluster.api import BrokerInfo
from ingest.cluster.config import ClusterConfig
from ingest.cluster.member import ClusterMember
from ingest.cluster.memory import MemoryClusterStore


class Hooks:
    def __init__(self) -> None:
        self.led: set[tuple[str, int]] = set()
        self.topic_reloads = 0

    async def lead(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.led.add((topic, partition))

    async def resign(self, topic: str, partition: int) -> None:
        self.led.discard((topic, partition))

    def begin_move(self, topic: str, partition: int) -> None:
        pass

    def end_move(self, topic: str, partition: int) -> None:
        pass

    async def recover_node(self, broker: BrokerInfo) -> None:
        pass

    async def topics_changed(self) -> None:
        self.topic_reloads += 1

    def fenced(self, reason: str) -> None:
        raise AssertionError(reason)

    def traffic(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {}


def _member(store: MemoryClusterStore, node: int, hooks: Hooks) -> ClusterMember:
    info = store.register_broker(node, "127.0.0.1", 9090 + node, None, f"wal/node-{node}/", 30_000)
    m = ClusterMember(
        store,
        ClusterConfig.model_validate({"session_timeout_ms": 30_000}),
        node_id=node,
        host="127.0.0.1",
        port=9090 + node,
        rack=None,
        object_prefix=f"wal/node-{node}/",
        hooks=hooks,
    )
    m._incarnation = info.incarnation
    return m


async def test_metadatas_refresh_names_a_leader_the_watch_loop_has_not_seen_yet() -> None:
    store = MemoryClusterStore()
    one, three = Hooks(), Hooks()
    first = _member(store, 1, one)
    _member(store, 2, Hooks())
    bystander = _member(store, 3, three)
    store.assign_new("t", [1])
    await first.sync()
    await bystander.sync()
    assert bystander.leader("t", 0) == (1, 0)
    store.hand_over("t", 0, 0, 2)  # node 1 handed p0 to node 2; node 3 was not told yet
    assert bystander.leader("t", 0) == (1, 0)
    await bystander.refresh_view(1.0)
    assert bystander.leader("t", 0) == (2, 1)
    assert three.led == set()  # a refresh names leaders; it opens nothing
    await bystander.sync()  # the watch loop still follows the change
    assert bystander.leader("t", 0) == (2, 1)
    assert three.topic_reloads == 1  # once, when "t" first appeared


async def test_a_read_from_before_a_hand_over_does_not_undo_it() -> None:
    store = MemoryClusterStore()
    hooks = Hooks()
    leaving = _member(store, 1, hooks)
    _member(store, 2, Hooks())
    store.assign_new("t", [1])
    await leaving.sync()
    assert hooks.led == {("t", 0)}
    stale = store.assignments()
    store.request_move("t", 0, 2)
    await leaving.sync()  # the leader sees the request and hands p0 over
    assert hooks.led == set()
    assert leaving.leader("t", 0) == (2, 1)
    # a read whose version is newer but whose rows predate the hand-over
    store.assign_new("u", [2])
    newer = store.version()
    real = store.assignments
    store.assignments = lambda: stale + [a for a in real() if a.topic == "u"]  # type: ignore[method-assign]
    await leaving._read_view(newer)
    assert leaving.leader("t", 0) == (2, 1)
    assert leaving.leader("u", 0) == (2, 0)
    store.assignments = real  # type: ignore[method-assign]
    await leaving.refresh_view(1.0)
    assert leaving.leader("t", 0) == (2, 1)
