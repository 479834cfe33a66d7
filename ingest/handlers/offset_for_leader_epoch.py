"""OffsetForLeaderEpoch (key 23).

Each partition has had one leader epoch since it was created, so the end
offset of any epoch up to the current one is the log end.

The response is built as a version 4 entity (every version has the same
fields); the dispatcher narrows it to the version the client asked for.

A rack-routed client (``tidelake_rack=`` in its ``client.id``) asks the broker
of its rack Metadata named; for a partition led elsewhere that broker forwards
the question to the leader and passes its answer back
(:mod:`ingest.handlers.led_elsewhere`): the end offset of an epoch is the
leader's high watermark, which a replica knows only up to the last upload, and
a consumer validating its position against a lagging end would truncate.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.offset_for_leader_epoch import v2, v3, v4
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import ask_leaders, leader_elsewhere
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle", "OffsetForLeaderEpochRequest"]

OffsetForLeaderEpochRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v2.OffsetForLeaderEpochRequest,
    v3.OffsetForLeaderEpochRequest,
    v4.OffsetForLeaderEpochRequest,
]

_OFFSET_FOR_LEADER_EPOCH = 23
_FORWARD_VERSION = 4
_Slots = dict[tuple[str, int], tuple[list[EpochEndOffset], int]]


def _end(index: int, code: ErrorCode, epoch: int = -1, end_offset: int = -1) -> EpochEndOffset:
    return EpochEndOffset(
        error_code=code, partition=i32(index), leader_epoch=i32(epoch), end_offset=i64(end_offset)
    )


async def handle(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    logs = ctx.broker.logs
    topics = []
    # partitions a rack-routed client asks about that another broker leads
    forward: dict[int, tuple[BrokerEndpoint, list[tuple[str, OffsetForLeaderPartition]]]] = {}
    slots: _Slots = {}
    for t in request.topics:
        parts: list[EpochEndOffset] = []
        for p in t.partitions:
            index = int(p.partition)
            log = logs.partition(t.topic, index)
            if (denied := acl.topic_denied(ctx, t.topic, acl.AclOperation.DESCRIBE)) is not None:
                parts.append(_end(index, denied[0]))
            elif log is None and (leader := leader_elsewhere(ctx, t.topic, index)) is not None:
                asked = OffsetForLeaderPartition(
                    partition=i32(index),
                    current_leader_epoch=p.current_leader_epoch,
                    leader_epoch=p.leader_epoch,
                )
                forward.setdefault(leader.node_id, (leader, []))[1].append((t.topic, asked))
                slots[(str(t.topic), index)] = (parts, len(parts))
                parts.append(_end(index, ErrorCode.not_leader_or_follower))
            elif log is None:
                parts.append(_end(index, logs.partition_error(t.topic, index)))
            elif int(p.current_leader_epoch) > log.leader_epoch:
                parts.append(_end(index, ErrorCode.unknown_leader_epoch))
            elif int(p.leader_epoch) > log.leader_epoch:
                parts.append(_end(index, ErrorCode.none))
            else:
                parts.append(_end(index, ErrorCode.none, log.leader_epoch, log.high_watermark))
        topics.append((t.topic, parts))
    if forward:
        await _ask_leaders(ctx, list(forward.values()), slots)
    return OffsetForLeaderEpochResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=tuple(
            OffsetForLeaderTopicResult(topic=TopicName(name), partitions=tuple(parts))
            for name, parts in topics
        ),
    )


async def _ask_leaders(
    ctx: RequestContext,
    forward: list[tuple[BrokerEndpoint, list[tuple[str, OffsetForLeaderPartition]]]],
    slots: _Slots,
) -> None:
    """Forward each leader its partitions (as OffsetForLeaderEpoch v4) and put
    its answers in their ``slots``; unanswered ones keep NOT_LEADER_OR_FOLLOWER."""
    requests = []
    for endpoint, wanted in forward:
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for name, part in wanted:
            by_topic.setdefault(name, []).append(part)
        request = v4.OffsetForLeaderEpochRequest(
            replica_id=BrokerId(-1),
            topics=tuple(
                OffsetForLeaderTopic(topic=TopicName(n), partitions=tuple(ps))
                for n, ps in by_topic.items()
            ),
        )
        requests.append((endpoint, request))
    for response in await ask_leaders(ctx, _OFFSET_FOR_LEADER_EPOCH, _FORWARD_VERSION, requests):
        if not isinstance(response, OffsetForLeaderEpochResponse):
            continue
        for rt in response.topics:
            for rp in rt.partitions:
                slot = slots.get((str(rt.topic), int(rp.partition)))
                if slot is not None:
                    slot[0][slot[1]] = rp
