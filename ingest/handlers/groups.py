"""The classic consumer group APIs: JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16, which
lists the consumer protocol's groups too) and DeleteGroups (42). The state
machine lives in ``ingest.group``; these functions translate wire entities to
its calls.

Each response is built as the entity of the highest version served (every
field any version has); the dispatcher narrows it to the version the client
asked for. In a cluster, a group another broker coordinates gets
NOT_COORDINATOR (see :func:`not_coordinator`); FindCoordinator (10) lives in
``ingest.handlers.find_coordinator``.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.delete_groups import v0 as dl0
from kio.schema.delete_groups import v1 as dl1
from kio.schema.delete_groups import v2 as dl2
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.describe_groups import v0 as dg0
from kio.schema.describe_groups import v1 as dg1
from kio.schema.describe_groups import v2 as dg2
from kio.schema.describe_groups import v3 as dg3
from kio.schema.describe_groups import v4 as dg4
from kio.schema.describe_groups import v5 as dg5
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.heartbeat import v0 as hb0
from kio.schema.heartbeat import v1 as hb1
from kio.schema.heartbeat import v2 as hb2
from kio.schema.heartbeat import v3 as hb3
from kio.schema.heartbeat import v4 as hb4
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group import v0 as jg0
from kio.schema.join_group import v1 as jg1
from kio.schema.join_group import v2 as jg2
from kio.schema.join_group import v3 as jg3
from kio.schema.join_group import v4 as jg4
from kio.schema.join_group import v5 as jg5
from kio.schema.join_group import v6 as jg6
from kio.schema.join_group import v7 as jg7
from kio.schema.join_group import v8 as jg8
from kio.schema.join_group import v9 as jg9
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.leave_group import v0 as lg0
from kio.schema.leave_group import v1 as lg1
from kio.schema.leave_group import v2 as lg2
from kio.schema.leave_group import v3 as lg3
from kio.schema.leave_group import v4 as lg4
from kio.schema.leave_group import v5 as lg5
from kio.schema.leave_group.v5.response import LeaveGroupResponse, MemberResponse
from kio.schema.list_groups import v0 as li0
from kio.schema.list_groups import v1 as li1
from kio.schema.list_groups import v2 as li2
from kio.schema.list_groups import v3 as li3
from kio.schema.list_groups import v4 as li4
from kio.schema.list_groups import v5 as li5
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.sync_group import v0 as sg0
from kio.schema.sync_group import v1 as sg1
from kio.schema.sync_group import v2 as sg2
from kio.schema.sync_group import v3 as sg3
from kio.schema.sync_group import v4 as sg4
from kio.schema.sync_group import v5 as sg5
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta

from ingest.group.types import ListedGroup as ListedGroupEntry
from ingest.handlers.authorized_operations import ResourceType, operations_field
from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = [
    "handle_join",
    "handle_heartbeat",
    "handle_leave",
    "handle_sync",
    "handle_describe",
    "handle_list",
    "handle_delete",
    "not_coordinator",
    "JoinGroupRequest",
    "HeartbeatRequest",
    "LeaveGroupRequest",
    "SyncGroupRequest",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "DeleteGroupsRequest",
]

JoinGroupRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    jg0.JoinGroupRequest,
    jg1.JoinGroupRequest,
    jg2.JoinGroupRequest,
    jg3.JoinGroupRequest,
    jg4.JoinGroupRequest,
    jg5.JoinGroupRequest,
    jg6.JoinGroupRequest,
    jg7.JoinGroupRequest,
    jg8.JoinGroupRequest,
    jg9.JoinGroupRequest,
]
HeartbeatRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    hb0.HeartbeatRequest,
    hb1.HeartbeatRequest,
    hb2.HeartbeatRequest,
    hb3.HeartbeatRequest,
    hb4.HeartbeatRequest,
]
LeaveGroupRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    lg0.LeaveGroupRequest,
    lg1.LeaveGroupRequest,
    lg2.LeaveGroupRequest,
    lg3.LeaveGroupRequest,
    lg4.LeaveGroupRequest,
    lg5.LeaveGroupRequest,
]
SyncGroupRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    sg0.SyncGroupRequest,
    sg1.SyncGroupRequest,
    sg2.SyncGroupRequest,
    sg3.SyncGroupRequest,
    sg4.SyncGroupRequest,
    sg5.SyncGroupRequest,
]
DescribeGroupsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    dg0.DescribeGroupsRequest,
    dg1.DescribeGroupsRequest,
    dg2.DescribeGroupsRequest,
    dg3.DescribeGroupsRequest,
    dg4.DescribeGroupsRequest,
    dg5.DescribeGroupsRequest,
]
ListGroupsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    li0.ListGroupsRequest,
    li1.ListGroupsRequest,
    li2.ListGroupsRequest,
    li3.ListGroupsRequest,
    li4.ListGroupsRequest,
    li5.ListGroupsRequest,
]
DeleteGroupsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    dl0.DeleteGroupsRequest,
    dl1.DeleteGroupsRequest,
    dl2.DeleteGroupsRequest,
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_READ = acl.AclOperation.READ


def not_coordinator(ctx: RequestContext, group: str) -> bool:
    """In a cluster, another broker coordinates this group: the client must
    look the coordinator up again (NOT_COORDINATOR)."""
    return (
        bool(group)
        and ctx.broker.cluster.coordinator_for(group).node_id != ctx.broker.cluster.node_id
    )


async def handle_join(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)  # v1+
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    # protocol_name is nullable from v7; before, an unknown one is "".
    no_protocol = "" if ctx.api_version < 7 else None
    if not request.group_id or not_coordinator(ctx, request.group_id):
        return JoinGroupResponse(
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode.not_coordinator
            if request.group_id
            else ErrorCode.invalid_group_id,
            generation_id=i32(-1),
            protocol_type=None,
            protocol_name=no_protocol,
            leader="",
            member_id=request.member_id,
            members=(),
        )
    if (refused := acl.group_refusal(ctx, request.group_id, _READ, generation_id=-1)) is not None:
        return refused  # type: ignore[no-any-return]
    res = await ctx.broker.groups.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),  # v5+
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
        require_known_member_id=ctx.api_version >= 4,
    )
    # A returning static leader skips assignment; before v9 it cannot be told
    # so, and Kafka sends it no member list instead.
    hide_members = res.skip_assignment and ctx.api_version < 9
    return JoinGroupResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode(res.error_code),
        generation_id=i32(res.generation_id),
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name or no_protocol,
        leader=res.leader,
        skip_assignment=res.skip_assignment,
        member_id=res.member_id,
        members=()
        if hide_members
        else tuple(
            JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in res.members
        ),
    )


async def handle_sync(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not_coordinator(ctx, request.group_id):
        return SyncGroupResponse(
            throttle_time=_NO_THROTTLE, error_code=ErrorCode.not_coordinator, assignment=b""
        )
    if (refused := acl.group_refusal(ctx, request.group_id, _READ)) is not None:
        return refused  # type: ignore[no-any-return]
    res = await ctx.broker.groups.sync_group(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),  # v3+
        protocol_type=getattr(request, "protocol_type", None),  # v5+
        protocol_name=getattr(request, "protocol_name", None),  # v5+
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return SyncGroupResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode(res.error_code),
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name,
        assignment=res.assignment,
    )


async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not_coordinator(ctx, request.group_id):
        return HeartbeatResponse(throttle_time=_NO_THROTTLE, error_code=ErrorCode.not_coordinator)
    if (refused := acl.group_refusal(ctx, request.group_id, _READ)) is not None:
        return refused  # type: ignore[no-any-return]
    code = await ctx.broker.groups.heartbeat(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),  # v3+
    )
    return HeartbeatResponse(throttle_time=_NO_THROTTLE, error_code=ErrorCode(code))


async def handle_leave(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    members: list[tuple[str, str | None]]
    if isinstance(request, lg0.LeaveGroupRequest | lg1.LeaveGroupRequest | lg2.LeaveGroupRequest):
        members = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    if not_coordinator(ctx, request.group_id):
        return LeaveGroupResponse(
            throttle_time=_NO_THROTTLE, error_code=ErrorCode.not_coordinator, members=()
        )
    if (refused := acl.group_refusal(ctx, request.group_id, _READ)) is not None:
        return refused  # type: ignore[no-any-return]
    res = await ctx.broker.groups.leave_group(group_id=request.group_id, members=members)
    # v0-v2 have one member and no per-member errors: its error is the answer.
    code = res.error_code
    if ctx.api_version < 3 and res.members and code == 0:
        code = res.members[0][2]
    return LeaveGroupResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode(code),
        members=tuple(
            MemberResponse(member_id=m, group_instance_id=i, error_code=ErrorCode(e))
            for m, i, e in res.members
        ),
    )


async def handle_describe(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    groups = await ctx.broker.groups.describe_groups(list(request.groups))
    groups = acl.described_groups(ctx, groups)
    asked_ops = bool(getattr(request, "include_authorized_operations", False))  # v3+
    return DescribeGroupsResponse(
        throttle_time=_NO_THROTTLE,
        groups=tuple(
            DescribedGroup(
                error_code=ErrorCode(g.error_code),
                group_id=GroupId(g.group_id),
                group_state=g.state,
                protocol_type=g.protocol_type or "",
                protocol_data=g.protocol or "",
                members=tuple(
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in g.members
                ),
                authorized_operations=i32(
                    operations_field(ctx, ResourceType.GROUP, g.group_id, asked=asked_ops)
                ),
            )
            for g in groups
        ),
    )


async def handle_list(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = list(getattr(request, "states_filter", ()) or ()) or None  # v4+
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}  # v5+
    groups = await ctx.broker.groups.list_groups(states)
    # groups of the consumer protocol (KIP-848), under its state names
    consumer = ctx.broker.consumer_groups.groups
    listed = [(g, "classic") for g in groups if g[0] not in consumer]
    listed += [
        (ListedGroupEntry(group_id, "consumer", group.state), "consumer")
        for group_id, group in sorted(consumer.items())
        if states is None or group.state in states
    ]
    listed = [
        (g, kind)
        for g, kind in listed
        if (not types or kind in types) and acl.listable_group(ctx, g[0])
    ]
    return ListGroupsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(
            ListedGroup(group_id=GroupId(g), protocol_type=t or "", group_state=s, group_type=kind)
            for (g, t, s), kind in listed
        ),
    )


async def handle_delete(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    denied = acl.groups_denied(ctx, request.groups_names, acl.AclOperation.DELETE)
    consumer = ctx.broker.consumer_groups
    # a consumer-protocol group with members is not deleted (as Kafka answers)
    busy: dict[str, int] = {
        g: int(ErrorCode.non_empty_group)
        for g in request.groups_names
        if g not in denied and consumer.active(g)
    }
    res = await ctx.broker.groups.delete_groups(
        [g for g in request.groups_names if g not in denied and g not in busy]
    )
    for g, code in res.items():
        if code == ErrorCode.none:
            consumer.groups.pop(g, None)
    res = {**denied, **busy, **res}
    return DeleteGroupsResponse(
        throttle_time=_NO_THROTTLE,
        results=tuple(
            DeletableGroupResult(group_id=GroupId(g), error_code=ErrorCode(c))
            for g, c in res.items()
        ),
    )
