"""ConsumerGroupHeartbeat (key 68): the consumer group protocol of KIP-848.

A member joins (epoch 0), heartbeats (its epoch, what changed: subscription,
owned partitions) and leaves (epoch -1, or -2 for a static member coming
back); the answer carries its epoch and, when it changed, its assignment.
Partitions travel as topic ids. The state machine is in
``ingest.group.consumer``; this module only translates the wire. Answered as
a version 1 entity (v0 has the same fields but the regex).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Union

from kio.schema.consumer_group_heartbeat import v0, v1
from kio.schema.consumer_group_heartbeat.v1.response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from kio.static.primitive import i32, i32Timedelta

from ingest.group.consumer import Heartbeat
from ingest.handlers.base import RequestContext
from ingest.handlers.groups import not_coordinator
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_group, authorize_topic
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "ConsumerGroupHeartbeatRequest"]

ConsumerGroupHeartbeatRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.ConsumerGroupHeartbeatRequest,
    v1.ConsumerGroupHeartbeatRequest,
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _failed(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=_NO_THROTTLE,
        error_code=code,
        error_message=message,
        member_id=None,
        member_epoch=i32(-1),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(0)),
        assignment=None,
    )


async def handle(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    group_id = request.group_id
    if not authorize_group(ctx, group_id, AclOperation.READ):
        return _failed(ErrorCode.group_authorization_failed)
    if not group_id:
        return _failed(ErrorCode.invalid_group_id, "group id must not be empty")
    if not_coordinator(ctx, group_id):
        return _failed(ErrorCode.not_coordinator)
    subscribed = request.subscribed_topic_names
    if subscribed is not None and not all(
        authorize_topic(ctx, t, AclOperation.DESCRIBE) for t in subscribed
    ):
        return _failed(ErrorCode.topic_authorization_failed)
    by_id = ctx.broker.logs.topics_by_id
    owned: set[tuple[str, int]] | None = None
    if request.topic_partitions is not None:
        owned = set()
        for tp in request.topic_partitions:
            topic = by_id.get(tp.topic_id) if tp.topic_id is not None else None
            if topic is not None:  # a deleted topic's partitions are simply gone
                owned |= {(topic.name, int(p)) for p in tp.partitions}
    rebalance_ms = int(request.rebalance_timeout.total_seconds() * 1000)
    result = ctx.broker.consumer_groups.heartbeat(
        group_id,
        Heartbeat(
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            client_id=ctx.client_id or "",
            client_host="/" + ctx.client_host,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed=set(subscribed) if subscribed is not None else None,
            regex=getattr(request, "subscribed_topic_regex", None),  # v1+
            assignor=request.server_assignor,
            owned=owned,
        ),
    )
    if result.error != ErrorCode.none:
        return _failed(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        by_topic: dict[str, list[int]] = {}
        for topic_name, partition in sorted(result.assignment):
            by_topic.setdefault(topic_name, []).append(partition)
        parts: list[TopicPartitions] = []
        for topic_name, partitions in by_topic.items():
            topic = ctx.broker.logs.topics.get(topic_name)
            if topic is None:
                continue
            parts.append(
                TopicPartitions(
                    topic_id=uuid.UUID(str(topic.topic_id)),
                    partitions=tuple(i32(p) for p in partitions),
                )
            )
        assignment = Assignment(topic_partitions=tuple(parts))
    interval = ctx.broker.consumer_groups.config.heartbeat_interval_ms
    return ConsumerGroupHeartbeatResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(milliseconds=interval)),
        assignment=assignment,
    )
