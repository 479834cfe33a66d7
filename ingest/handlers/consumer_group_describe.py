"""ConsumerGroupDescribe (key 69): groups of the consumer group protocol
(KIP-848) with their epochs, assignor, and each member's current and target
assignment. A group id that is not such a group answers GROUP_ID_NOT_FOUND.
Classic members of a group being migrated (KIP-848) are listed with member
type 0, the others with 1."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from typing import Union

from kio.schema.consumer_group_describe import v0, v1
from kio.schema.consumer_group_describe.v1.response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta

from ingest.handlers.authorized_operations import ResourceType, operations_field
from ingest.handlers.base import RequestContext
from ingest.handlers.groups import not_coordinator
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_group
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "ConsumerGroupDescribeRequest"]

ConsumerGroupDescribeRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.ConsumerGroupDescribeRequest,
    v1.ConsumerGroupDescribeRequest,
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_CONSUMER_MEMBER = i8(1)  # member_type: a member of the consumer protocol
_CLASSIC_MEMBER = i8(0)  # ... of the classic protocol (online migration)


def _assignment(ctx: RequestContext, partitions: Iterable[tuple[str, int]]) -> Assignment:
    by_topic: dict[str, list[int]] = {}
    for name, partition in sorted(partitions):
        by_topic.setdefault(name, []).append(partition)
    out = []
    for name, ps in by_topic.items():
        known = ctx.broker.logs.topics.get(name)
        out.append(
            TopicPartitions(
                topic_id=uuid.UUID(str(known.topic_id)) if known is not None else None,
                topic_name=TopicName(name),
                partitions=tuple(i32(p) for p in ps),
            )
        )
    return Assignment(topic_partitions=tuple(out))


def _missing(group_id: str, code: ErrorCode, message: str) -> DescribedGroup:
    return DescribedGroup(
        error_code=code,
        error_message=message,
        group_id=GroupId(group_id),
        group_state="Dead",
        group_epoch=i32(-1),
        assignment_epoch=i32(-1),
        assignor_name="",
        members=(),
    )


def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> DescribedGroup:
    if not authorize_group(ctx, group_id, AclOperation.DESCRIBE):
        return _missing(group_id, ErrorCode.group_authorization_failed, "not authorized")
    if not_coordinator(ctx, group_id):
        return _missing(group_id, ErrorCode.not_coordinator, "another broker coordinates it")
    group = ctx.broker.consumer_groups.groups.get(group_id)
    if group is None:
        return _missing(group_id, ErrorCode.group_id_not_found, f"no consumer group {group_id!r}")
    return DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=GroupId(group_id),
        group_state=group.state,
        group_epoch=i32(group.epoch),
        assignment_epoch=i32(group.target_epoch),
        assignor_name=group.assignor_name,
        members=tuple(
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(TopicName(t) for t in sorted(m.subscribed)),
                subscribed_topic_regex=m.regex,
                assignment=_assignment(ctx, m.assigned),
                target_assignment=_assignment(ctx, group.target.get(m.member_id, set())),
                member_type=_CLASSIC_MEMBER if m.classic is not None else _CONSUMER_MEMBER,
            )
            for m in group.members.values()
        ),
        authorized_operations=i32(
            operations_field(ctx, ResourceType.GROUP, group_id, asked=with_operations)
        ),
    )


async def handle(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        throttle_time=_NO_THROTTLE,
        groups=tuple(
            _describe(ctx, g, request.include_authorized_operations) for g in request.group_ids
        ),
    )
