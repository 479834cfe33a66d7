"""OffsetCommit (8) and OffsetFetch (9).

OffsetCommit's response is built as a version 8 entity (every field the
served versions have); OffsetFetch's as version 7 (one group: ``topics`` and
``error_code``) or version 8 (``groups``), the two shapes the API has.
Version 9 of both carries a member epoch for groups of the consumer group
protocol (KIP-848), checked by ``ingest.group.consumer``. The
dispatcher narrows either to the version the client asked for.

A group another broker coordinates gets NOT_COORDINATOR for every partition
(the client looks the coordinator up again); a partition this cluster does not
have gets UNKNOWN_TOPIC_OR_PARTITION and is not committed.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol, Union

from kio.schema.offset_commit import v2 as c2
from kio.schema.offset_commit import v3 as c3
from kio.schema.offset_commit import v4 as c4
from kio.schema.offset_commit import v5 as c5
from kio.schema.offset_commit import v6 as c6
from kio.schema.offset_commit import v7 as c7
from kio.schema.offset_commit import v8 as c8
from kio.schema.offset_commit import v9 as c9
from kio.schema.offset_commit.v8.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.offset_fetch import v1 as f1
from kio.schema.offset_fetch import v2 as f2
from kio.schema.offset_fetch import v3 as f3
from kio.schema.offset_fetch import v4 as f4
from kio.schema.offset_fetch import v5 as f5
from kio.schema.offset_fetch import v6 as f6
from kio.schema.offset_fetch import v7 as f7
from kio.schema.offset_fetch import v8 as f8
from kio.schema.offset_fetch import v9 as f9
from kio.schema.offset_fetch.v7 import response as one
from kio.schema.offset_fetch.v8 import response as many
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.handlers.base import RequestContext
from ingest.handlers.groups import not_coordinator
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle_commit", "handle_fetch", "OffsetCommitRequest", "OffsetFetchRequest"]

OffsetCommitRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    c2.OffsetCommitRequest,
    c3.OffsetCommitRequest,
    c4.OffsetCommitRequest,
    c5.OffsetCommitRequest,
    c6.OffsetCommitRequest,
    c7.OffsetCommitRequest,
    c8.OffsetCommitRequest,
    c9.OffsetCommitRequest,
]
OffsetFetchRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    f1.OffsetFetchRequest,
    f2.OffsetFetchRequest,
    f3.OffsetFetchRequest,
    f4.OffsetFetchRequest,
    f5.OffsetFetchRequest,
    f6.OffsetFetchRequest,
    f7.OffsetFetchRequest,
    f8.OffsetFetchRequest,
    f9.OffsetFetchRequest,
]
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


async def handle_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    offsets: list[tuple[str, int, int, int, str | None]] = []
    unknown: set[tuple[str, int]] = set()
    denied = acl.topics_denied(
        ctx, (t.name for t in request.topics), acl.AclOperation.READ, group=request.group_id
    )
    for t in request.topics:
        for p in t.partitions:
            if t.name in denied or not ctx.broker.logs.has_partition(t.name, p.partition_index):
                unknown.add((t.name, p.partition_index))
                continue
            offsets.append(
                (
                    t.name,
                    int(p.partition_index),
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),  # v6+
                    p.committed_metadata,
                )
            )
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not_coordinator(ctx, request.group_id):
        errors = {
            (t.name, int(p.partition_index)): ErrorCode.not_coordinator
            for t in request.topics
            for p in t.partitions
        }
        unknown = set()
    elif (
        checked := ctx.broker.consumer_groups.validate_offsets(
            request.group_id,
            request.member_id,
            int(request.generation_id_or_member_epoch),
            api_version=ctx.api_version,
        )
    ) is not None:
        # a group of the consumer protocol (KIP-848): a member's epoch is the
        # generation; a consumer member needs v9+, a classic member (online
        # migration) commits with its generation as it did before
        if checked != ErrorCode.none:
            errors = {(t, p): checked for t, p, *_ in offsets}
        else:
            stored = await ctx.broker.groups.store_offsets(request.group_id, offsets)
            errors = {key: ErrorCode(code) for key, code in stored.items()}
    elif offsets or not unknown:
        committed = await ctx.broker.groups.commit_offsets(
            group_id=request.group_id,
            generation_id=int(request.generation_id_or_member_epoch),
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),  # v7+
            offsets=offsets,
        )
        errors = {key: ErrorCode(code) for key, code in committed.items()}
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            code = (
                denied.get(t.name, ErrorCode.unknown_topic_or_partition)
                if key in unknown
                else errors.get(key, ErrorCode.none)
            )
            parts.append(
                OffsetCommitResponsePartition(partition_index=i32(key[1]), error_code=code)
            )
        topics.append(OffsetCommitResponseTopic(name=TopicName(t.name), partitions=tuple(parts)))
    return OffsetCommitResponse(throttle_time=_NO_THROTTLE, topics=tuple(topics))


async def _fetch_group(
    ctx: RequestContext,
    group_id: str,
    partitions: list[tuple[str, int]] | None,
    require_stable: bool,
    member: tuple[str, int] | None = None,
) -> many.OffsetFetchResponseGroup:
    if (denied := acl.group_denied(ctx, group_id, acl.AclOperation.DESCRIBE)) is not None:
        return many.OffsetFetchResponseGroup(
            group_id=GroupId(group_id), topics=(), error_code=denied[0]
        )
    if member is not None:  # v9+: a member of a consumer group (KIP-848) asks
        checked = ctx.broker.consumer_groups.validate_offsets(group_id, *member)
        if checked is not None and checked != ErrorCode.none:
            return many.OffsetFetchResponseGroup(
                group_id=GroupId(group_id), topics=(), error_code=checked
            )
    res = await ctx.broker.groups.fetch_offsets(
        group_id=group_id, partitions=partitions, require_stable=require_stable
    )
    by_topic: dict[str, list[many.OffsetFetchResponsePartitions]] = {}
    for topic, partition, offset, epoch, metadata, code in res.partitions:
        if not acl.authorize_topic(ctx, topic, acl.AclOperation.DESCRIBE):
            if partitions is None:
                continue  # every committed topic asked for: the unauthorized are left out
            offset, epoch, metadata = -1, -1, None
            code = int(ErrorCode.topic_authorization_failed)
        by_topic.setdefault(topic, []).append(
            many.OffsetFetchResponsePartitions(
                partition_index=i32(partition),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(epoch),
                metadata=metadata if metadata is not None else "",
                error_code=ErrorCode(code),
            )
        )
    return many.OffsetFetchResponseGroup(
        group_id=GroupId(group_id),
        topics=tuple(
            many.OffsetFetchResponseTopics(name=TopicName(n), partitions=tuple(ps))
            for n, ps in by_topic.items()
        ),
        error_code=ErrorCode(res.error_code),
    )


class _FetchTopic(Protocol):
    """A topic of an OffsetFetch request, in any version."""

    @property
    def name(self) -> TopicName: ...

    @property
    def partition_indexes(self) -> tuple[i32, ...]: ...


def _partitions(topics: Sequence[_FetchTopic] | None) -> list[tuple[str, int]] | None:
    if topics is None:
        return None  # every partition the group has committed
    return [(t.name, int(i)) for t in topics for i in t.partition_indexes]


async def handle_fetch(
    ctx: RequestContext, request: OffsetFetchRequest
) -> one.OffsetFetchResponse | many.OffsetFetchResponse:
    require_stable = bool(getattr(request, "require_stable", False))  # v7+
    if isinstance(request, f9.OffsetFetchRequest):
        groups = [
            await _fetch_group(
                ctx,
                g.group_id,
                _partitions(g.topics),
                require_stable,
                (g.member_id, int(g.member_epoch)) if g.member_id else None,
            )
            for g in request.groups
        ]
        return many.OffsetFetchResponse(throttle_time=_NO_THROTTLE, groups=tuple(groups))
    if isinstance(request, f8.OffsetFetchRequest):
        groups = [
            await _fetch_group(ctx, g.group_id, _partitions(g.topics), require_stable)
            for g in request.groups
        ]
        return many.OffsetFetchResponse(throttle_time=_NO_THROTTLE, groups=tuple(groups))
    group = await _fetch_group(ctx, request.group_id, _partitions(request.topics), require_stable)
    return one.OffsetFetchResponse(
        throttle_time=_NO_THROTTLE,
        topics=tuple(
            one.OffsetFetchResponseTopic(
                name=t.name,
                partitions=tuple(
                    one.OffsetFetchResponsePartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        error_code=p.error_code,
                    )
                    for p in t.partitions
                ),
            )
            for t in group.topics
        ),
        error_code=group.error_code,
    )
