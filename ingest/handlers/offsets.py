"""OffsetCommit (8) and OffsetFetch (9)."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = ["handle_commit", "handle_fetch"]


async def handle_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    offsets: list[tuple[str, int, int, int, str | None]] = []
    unknown: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            if ctx.broker.logs.partition(t.name, p.partition_index) is None:
                unknown.add((t.name, p.partition_index))
                continue
            offsets.append(
                (
                    t.name,
                    int(p.partition_index),
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    p.committed_metadata,
                )
            )
    errors: dict[tuple[str, int], int] = {}
    if offsets or not unknown:
        errors = await ctx.broker.groups.commit_offsets(
            group_id=request.group_id,
            generation_id=int(request.generation_id_or_member_epoch),
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
        )
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            code = ErrorCode.unknown_topic_or_partition if key in unknown else errors.get(key, 0)
            parts.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


async def _fetch_group(
    ctx: RequestContext, group_id: str, topics: Any, require_stable: bool
) -> dict[str, Any]:
    partitions = None
    if topics is not None:
        partitions = [(t.name, int(i)) for t in topics for i in t.partition_indexes]
    res = await ctx.broker.groups.fetch_offsets(
        group_id=group_id, partitions=partitions, require_stable=require_stable
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset, epoch, metadata, code in res.partitions:
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": epoch,
                "metadata": metadata if metadata is not None else "",
                "error_code": code,
            }
        )
    return {
        "group_id": group_id,
        "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
        "error_code": res.error_code,
    }


async def handle_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    require_stable = bool(getattr(request, "require_stable", False))
    if hasattr(request, "groups"):
        groups = [
            await _fetch_group(ctx, g.group_id, g.topics, require_stable) for g in request.groups
        ]
        return {"throttle_time": 0, "groups": groups}
    one = await _fetch_group(ctx, request.group_id, request.topics, require_stable)
    return {"throttle_time": 0, "topics": one["topics"], "error_code": one["error_code"]}
