"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46).

A partition of Tidelake has one replica, its leader; its data lives in
object storage, which keeps the copies, so there are no broker-to-broker
replicas to add or remove. A reassignment therefore names exactly one
broker, and moving a partition moves its leadership: the current leader
flushes the partition's recent data to object storage and hands it over,
and no data is copied.

In Kafka these requests go to the controller. Here any broker writes the
request to the cluster store (through its
:class:`~ingest.cluster.member.ClusterMember`) and the partition's leader
carries it out when it sees the change, so every broker accepts them. A
single broker answers as a one-broker Kafka cluster would: the only valid
target is itself, and nothing is ever in flight.

Alter is built as a version 1 entity; the dispatcher narrows it for version
0 clients.
"""

from __future__ import annotations

import datetime
import logging
from typing import Union

from kio.schema.alter_partition_reassignments import v0 as alter_v0
from kio.schema.alter_partition_reassignments import v1 as alter_v1
from kio.schema.alter_partition_reassignments.v1.response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from ingest.cluster.errors import UnknownPartitionError
from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle_alter", "handle_list", "AlterPartitionReassignmentsRequest"]

AlterPartitionReassignmentsRequest = Union[  # noqa: UP007
    alter_v0.AlterPartitionReassignmentsRequest, alter_v1.AlterPartitionReassignmentsRequest
]

log = logging.getLogger(__name__)

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_ONE_REPLICA = (
    "a partition has exactly one replica, its leader: object storage keeps the copies, so "
    "there are no broker-to-broker replicas; name the one broker that should lead it"
)

Outcome = tuple[ErrorCode, str | None]


def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    t = ctx.broker.logs.get(topic)
    return t is not None and 0 <= partition < t.partition_count


async def _alter_one(
    ctx: RequestContext, topic: str, partition: int, replicas: tuple[BrokerId, ...] | None
) -> Outcome:
    member = ctx.broker.member
    if not _known(ctx, topic, partition):
        return ErrorCode.unknown_topic_or_partition, f"no partition {topic}-{partition}"
    if replicas is None:  # cancel
        if member is not None and await member.cancel_move(topic, partition):
            return ErrorCode.none, None
        return ErrorCode.no_reassignment_in_progress, f"no reassignment of {topic}-{partition}"
    if len(replicas) != 1:
        return (
            ErrorCode.invalid_replica_assignment,
            f"{len(replicas)} replicas given: {_ONE_REPLICA}",
        )
    target = int(replicas[0])
    if member is None:
        if target != ctx.broker.cluster.node_id:
            return (
                ErrorCode.invalid_replica_assignment,
                f"broker {target} does not exist (this single broker is {ctx.broker.cluster.node_id})",
            )
        return ErrorCode.none, None
    if target not in await member.eligible_leaders():
        return (
            ErrorCode.invalid_replica_assignment,
            f"broker {target} is not a live broker of the cluster (or it is draining)",
        )
    try:
        await member.request_move(topic, partition, target)
    except UnknownPartitionError:
        return ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} has no leader assigned"
    log.info(
        "reassignment: %s-%d to node %d (asked by %s)", topic, partition, target, ctx.client_id
    )
    return ErrorCode.none, None


async def handle_alter(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if (refused := acl.cluster_refusal(ctx, acl.AclOperation.ALTER)) is not None:
        return refused  # type: ignore[no-any-return]
    topics: list[ReassignableTopicResponse] = []
    for t in request.topics:
        parts: list[ReassignablePartitionResponse] = []
        for p in t.partitions:
            code, message = await _alter_one(ctx, t.name, int(p.partition_index), p.replicas)
            parts.append(
                ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
            )
        topics.append(ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return AlterPartitionReassignmentsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(topics),
    )


async def handle_list(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """Moves in flight, as Kafka lists them: the replicas are the old leader
    and the target, the target being added and the old leader removed."""
    if (refused := acl.cluster_refusal(ctx, acl.AclOperation.DESCRIBE)) is not None:
        return refused  # type: ignore[no-any-return]
    member = ctx.broker.member
    moves = member.reassignments() if member is not None else []
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(t.name, set()).update(int(i) for i in t.partition_indexes)
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for a in moves:
        if wanted is not None and a.partition not in wanted.get(a.topic, ()):
            continue
        assert a.target is not None
        by_topic.setdefault(a.topic, []).append(
            OngoingPartitionReassignment(
                partition_index=i32(a.partition),
                replicas=(BrokerId(a.target), BrokerId(a.leader)),
                adding_replicas=(BrokerId(a.target),),
                removing_replicas=(BrokerId(a.leader),),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            OngoingTopicReassignment(name=TopicName(name), partitions=tuple(parts))
            for name, parts in sorted(by_topic.items())
        ),
    )
