"""TxnOffsetCommit (key 28): offsets a transactional producer commits for a
consumer group, sent to the group's coordinator; they become the group's offsets when the transaction commits
and vanish when it aborts.

From version 3 the request names the consumer's generation and member id
(KIP-447) and they are checked as OffsetCommit checks them. The response is
built as a version 4 entity (every version has its fields).
"""

from __future__ import annotations

from typing import Union

from kio.schema.txn_offset_commit import v0, v1, v2, v3, v4
from kio.schema.txn_offset_commit.v4.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kio.schema.types import TopicName

from ingest.handlers.base import RequestContext
from ingest.handlers.groups import not_coordinator
from ingest.handlers.txn_common import NO_THROTTLE, coordinator, refusal
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_group, authorize_topic
from ingest.security.acl.model import AclOperation
from ingest.txn import PendingOffset

__all__ = ["handle", "TxnOffsetCommitRequest"]

TxnOffsetCommitRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.TxnOffsetCommitRequest,
    v1.TxnOffsetCommitRequest,
    v2.TxnOffsetCommitRequest,
    v3.TxnOffsetCommitRequest,
    v4.TxnOffsetCommitRequest,
]


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    group = request.group_id
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]
    # sent to the group's coordinator, which in a cluster need not be the
    # transaction's
    code = refusal(ctx, request.transactional_id)
    if code is None and not_coordinator(ctx, group):
        code = ErrorCode.not_coordinator
    if code is None and not authorize_group(ctx, group, AclOperation.READ):
        code = ErrorCode.group_authorization_failed
    if code is None and not group:
        code = ErrorCode.invalid_group_id
    if code is None:
        code = ErrorCode(
            await ctx.broker.groups.validate_generation(
                group,
                int(getattr(request, "generation_id", -1)),  # v3+
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
            )
        )
    per: dict[tuple[str, int], ErrorCode] = {}
    offsets: list[PendingOffset] = []
    limit = ctx.broker.groups.max_metadata_bytes
    for topic, p in wanted:
        index = int(p.partition_index)
        if code is not None and code != ErrorCode.none:
            per[(topic, index)] = code
        elif not authorize_topic(ctx, topic, AclOperation.READ):
            per[(topic, index)] = ErrorCode.topic_authorization_failed
        elif not ctx.broker.logs.has_partition(topic, index):
            per[(topic, index)] = ErrorCode.unknown_topic_or_partition
        elif p.committed_metadata is not None and len(p.committed_metadata) > limit:
            per[(topic, index)] = ErrorCode.offset_metadata_too_large
        else:
            offsets.append(
                PendingOffset(
                    topic,
                    index,
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),  # v2+
                    p.committed_metadata,
                )
            )
    if offsets:
        stored = await coordinator(ctx).commit_offsets(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            group,
            offsets,
        )
        if stored == ErrorCode.producer_fenced:
            stored = ErrorCode.invalid_producer_epoch  # what TxnOffsetCommit answers
        for o in offsets:
            per[(o.topic, o.partition)] = stored
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for topic, p in wanted:
        index = int(p.partition_index)
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=per[(topic, index)]
            )
        )
    return TxnOffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TxnOffsetCommitResponseTopic(name=TopicName(name), partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
