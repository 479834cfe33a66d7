"""AlterPartitionReassignments and ListPartitionReassignments over the
in-memory cluster store: a request names the partition's next leader, stays
listed while the leader has not handed over, and can be cancelled."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from ingest.cluster.config import ClusterConfig
from ingest.cluster.member import ClusterMember
from ingest.cluster.memory import MemoryClusterStore
from ingest.handlers.partition_reassignments import handle_alter, handle_list
from ingest.protocol.errors import ErrorCode
from tests.unit.cluster.test_controller import Hooks


async def _setup() -> tuple[MemoryClusterStore, Any]:
    store = MemoryClusterStore()
    store.register_broker(1, "127.0.0.1", 9092, None, "wal/node-1/", 60_000)
    store.register_broker(2, "127.0.0.1", 9093, None, "wal/node-2/", 60_000)
    store.assign_new("t", [2, 2])  # led by node 2, which is not running here
    member = ClusterMember(
        store,
        ClusterConfig(),
        node_id=1,
        host="127.0.0.1",
        port=9092,
        rack=None,
        object_prefix="wal/node-1/",
        hooks=Hooks(),
    )
    await member.sync()
    logs = SimpleNamespace(
        get=lambda name: SimpleNamespace(partition_count=2) if name == "t" else None
    )
    broker = SimpleNamespace(member=member, cluster=member, logs=logs)
    return store, SimpleNamespace(broker=broker, client_id="test")


async def _alter(ctx: Any, topic: str, partition: int, replicas: tuple[int, ...] | None) -> Any:
    request = AlterPartitionReassignmentsRequest(
        topics=(
            ReassignableTopic(
                name=TopicName(topic),
                partitions=(
                    ReassignablePartition(
                        partition_index=i32(partition),
                        replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
                    ),
                ),
            ),
        )
    )
    response = await handle_alter(ctx, request)
    [t] = response.responses
    [p] = t.partitions
    return p.error_code


async def _listed(ctx: Any, partitions: tuple[int, ...] | None = None) -> list[tuple[Any, ...]]:
    topics = (
        None
        if partitions is None
        else (
            ListPartitionReassignmentsTopics(
                name=TopicName("t"), partition_indexes=tuple(i32(p) for p in partitions)
            ),
        )
    )
    response = await handle_list(ctx, ListPartitionReassignmentsRequest(topics=topics))
    return [
        (t.name, int(p.partition_index), p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    ]


async def test_a_requested_move_is_listed_until_the_leader_hands_over() -> None:
    store, ctx = await _setup()
    assert await _alter(ctx, "t", 0, (1,)) == ErrorCode.none
    assert {a.partition: a.target for a in store.assignments()} == {0: 1, 1: None}
    # as Kafka lists a move: both replicas, the target being added, the old leader removed
    assert await _listed(ctx) == [("t", 0, (1, 2), (1,), (2,))]
    assert await _listed(ctx, (1,)) == []


async def test_a_move_in_flight_can_be_cancelled_once() -> None:
    store, ctx = await _setup()
    assert await _alter(ctx, "t", 1, (1,)) == ErrorCode.none
    assert await _alter(ctx, "t", 1, None) == ErrorCode.none
    [a] = [a for a in store.assignments() if a.partition == 1]
    assert (a.leader, a.target) == (2, None)  # node 2 keeps it
    await ctx.broker.member.sync()
    assert await _listed(ctx) == []
    assert await _alter(ctx, "t", 1, None) == ErrorCode.no_reassignment_in_progress


async def test_moves_to_unknown_brokers_or_partitions_are_refused() -> None:
    store, ctx = await _setup()
    assert await _alter(ctx, "t", 0, (3,)) == ErrorCode.invalid_replica_assignment
    assert await _alter(ctx, "t", 0, (1, 2)) == ErrorCode.invalid_replica_assignment
    assert await _alter(ctx, "t", 0, ()) == ErrorCode.invalid_replica_assignment
    assert await _alter(ctx, "t", 7, (1,)) == ErrorCode.unknown_topic_or_partition
    assert await _alter(ctx, "nope", 0, (1,)) == ErrorCode.unknown_topic_or_partition
    assert await _alter(ctx, "t", 0, (2,)) == ErrorCode.none  # already led there
    assert all(a.target is None for a in store.assignments())
