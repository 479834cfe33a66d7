"""The classic consumer group APIs: FindCoordinator (10), JoinGroup (11),
Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
ListGroups (16) and DeleteGroups (42). The state machine lives in
``ingest.group``; these functions translate wire entities to its calls."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = [
    "handle_find_coordinator",
    "handle_join",
    "handle_heartbeat",
    "handle_leave",
    "handle_sync",
    "handle_describe",
    "handle_list",
    "handle_delete",
]

_GROUP_KEY = 0


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    cfg = ctx.broker.config
    if key_type != _GROUP_KEY:
        # Not COORDINATOR_NOT_AVAILABLE: that is retriable, and a transactional
        # producer would retry until its timeout instead of failing at once.
        return {
            "key": key,
            "error_code": ErrorCode.transactional_id_authorization_failed,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_message": "transactions are not supported yet",
        }
    if not key:
        return {
            "key": key,
            "error_code": ErrorCode.invalid_group_id,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_message": "group id must not be empty",
        }
    return {
        "key": key,
        "error_code": 0,
        "node_id": cfg.node_id,
        "host": cfg.public_host,
        "port": ctx.broker.port,
        "error_message": None,
    }


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> dict[str, Any]:
    key_type = int(getattr(request, "key_type", 0))
    if hasattr(request, "coordinator_keys"):
        return {
            "throttle_time": 0,
            "coordinators": [_coordinator(ctx, k, key_type) for k in request.coordinator_keys],
        }
    c = _coordinator(ctx, request.key, key_type)
    c.pop("key")
    c["throttle_time"] = 0
    return c


async def handle_join(ctx: RequestContext, request: Any) -> dict[str, Any]:
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    if not request.group_id:
        return {
            "error_code": ErrorCode.invalid_group_id,
            "generation_id": -1,
            "member_id": request.member_id,
            "leader": "",
            "throttle_time": 0,
        }
    res = await ctx.broker.groups.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
        require_known_member_id=ctx.api_version >= 4,
    )
    return {
        "throttle_time": 0,
        "error_code": res.error_code,
        "generation_id": res.generation_id,
        "protocol_type": res.protocol_type,
        "protocol_name": res.protocol_name or ("" if ctx.api_version < 7 else None),
        "leader": res.leader,
        "skip_assignment": res.skip_assignment,
        "member_id": res.member_id,
        # A returning static leader skips assignment; before v9 it cannot be
        # told so, and Kafka sends it no member list instead.
        "members": []
        if res.skip_assignment and ctx.api_version < 9
        else [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in res.members
        ],
    }


async def handle_sync(ctx: RequestContext, request: Any) -> dict[str, Any]:
    res = await ctx.broker.groups.sync_group(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return {
        "throttle_time": 0,
        "error_code": res.error_code,
        "protocol_type": res.protocol_type,
        "protocol_name": res.protocol_name,
        "assignment": res.assignment,
    }


async def handle_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    code = await ctx.broker.groups.heartbeat(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return {"throttle_time": 0, "error_code": code}


async def handle_leave(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if hasattr(request, "members"):
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    res = await ctx.broker.groups.leave_group(group_id=request.group_id, members=members)
    return {
        "throttle_time": 0,
        "error_code": res.error_code
        if ctx.api_version >= 3 or not res.members
        else (res.members[0][2] if res.error_code == 0 else res.error_code),
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in res.members
        ],
    }


async def handle_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    groups = await ctx.broker.groups.describe_groups(list(request.groups))
    return {
        "throttle_time": 0,
        "groups": [
            {
                "error_code": g.error_code,
                "group_id": g.group_id,
                "group_state": g.state,
                "protocol_type": g.protocol_type or "",
                "protocol_data": g.protocol or "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in g.members
                ],
                "authorized_operations": -2147483648,
            }
            for g in groups
        ],
    }


async def handle_list(ctx: RequestContext, request: Any) -> dict[str, Any]:
    states = list(getattr(request, "states_filter", ()) or ()) or None
    groups = await ctx.broker.groups.list_groups(states)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "groups": [
            {"group_id": g, "protocol_type": t or "", "group_state": s} for g, t, s in groups
        ],
    }


async def handle_delete(ctx: RequestContext, request: Any) -> dict[str, Any]:
    res = await ctx.broker.groups.delete_groups(list(request.groups_names))
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": c} for g, c in res.items()],
    }
