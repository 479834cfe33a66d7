"""ListOffsets (key 2): earliest, latest, max timestamp, or by timestamp.

The response is built as a version 8 entity (every field the served versions
have); the dispatcher narrows it to the version the client asked for.

With isolation level 1 (read committed), LATEST is the last stable offset and
a look-up by time (or max timestamp) that lands at or past it finds nothing,
as in Kafka: a read_committed consumer is never pointed past what it can read.

Requests Kafka would answer with an error rather than parse differently:
an isolation level other than 0 (read uncommitted) or 1 (read committed), and a
partition named twice, get INVALID_REQUEST for the partitions concerned, as
Kafka answers duplicates. A null where the schema forbids one never gets here:
the codec refuses the frame and the connection is closed, as Kafka does.

A rack-routed client (``tidelake_rack=`` in its ``client.id``) asks the broker
of its rack Metadata named; for a partition led elsewhere that broker forwards
the question to the leader and passes its answer back
(:mod:`ingest.handlers.led_elsewhere`): offsets carry no payload, and only the
leader knows the high watermark and last stable offset exactly.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.list_offsets import v1, v2, v3, v4, v5, v6, v7, v8
from kio.schema.list_offsets.v8.request import ListOffsetsPartition, ListOffsetsTopic
from kio.schema.list_offsets.v8.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import ask_leaders, leader_elsewhere
from ingest.log.partition import EARLIEST, LATEST
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle", "ListOffsetsRequest"]

ListOffsetsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v1.ListOffsetsRequest,
    v2.ListOffsetsRequest,
    v3.ListOffsetsRequest,
    v4.ListOffsetsRequest,
    v5.ListOffsetsRequest,
    v6.ListOffsetsRequest,
    v7.ListOffsetsRequest,
    v8.ListOffsetsRequest,
]

_LIST_OFFSETS = 2
_FORWARD_VERSION = 8
_ISOLATION_LEVELS = (0, 1)
_READ_COMMITTED = 1


def _error(index: int, code: ErrorCode) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=i32(index), error_code=code, timestamp=i64(-1), offset=i64(-1)
    )


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = int(getattr(request, "isolation_level", 0))  # v2+
    seen: dict[tuple[str, int], int] = {}
    for t in request.topics:
        for p in t.partitions:
            key = (str(t.name), int(p.partition_index))
            seen[key] = seen.get(key, 0) + 1
    topics = []
    # partitions a rack-routed client asks about that another broker leads
    forward: dict[int, tuple[BrokerEndpoint, list[tuple[str, ListOffsetsPartition]]]] = {}
    slots: dict[tuple[str, int], tuple[list[ListOffsetsPartitionResponse], int]] = {}
    for t in request.topics:
        parts: list[ListOffsetsPartitionResponse] = []
        for p in t.partitions:
            index = int(p.partition_index)
            if isolation not in _ISOLATION_LEVELS or seen[(str(t.name), index)] > 1:
                parts.append(_error(index, ErrorCode.invalid_request))
                continue
            if (denied := acl.topic_denied(ctx, t.name, acl.AclOperation.DESCRIBE)) is not None:
                parts.append(_error(index, denied[0]))
                continue
            log = ctx.broker.logs.partition(t.name, index)
            if log is None and (leader := leader_elsewhere(ctx, t.name, index)) is not None:
                wanted_at = ListOffsetsPartition(
                    partition_index=i32(index),
                    current_leader_epoch=i32(int(getattr(p, "current_leader_epoch", -1))),
                    timestamp=p.timestamp,
                )
                forward.setdefault(leader.node_id, (leader, []))[1].append((t.name, wanted_at))
                slots[(str(t.name), index)] = (parts, len(parts))
                parts.append(_error(index, ErrorCode.not_leader_or_follower))
                continue
            if log is None:
                parts.append(_error(index, ErrorCode.unknown_topic_or_partition))
                continue
            wanted = int(p.timestamp)
            offset, ts = await log.offset_for(wanted)
            if isolation == _READ_COMMITTED and wanted != EARLIEST:
                stable = log.last_stable_offset
                if wanted == LATEST:
                    offset = stable
                elif offset >= stable:
                    offset, ts = -1, -1
            parts.append(
                ListOffsetsPartitionResponse(
                    partition_index=i32(index),
                    error_code=ErrorCode.none,
                    timestamp=i64(ts),
                    offset=i64(offset),
                    leader_epoch=i32(log.leader_epoch if offset >= 0 else -1),
                )
            )
        topics.append((t.name, parts))
    if forward:
        await _ask_leaders(ctx, isolation, list(forward.values()), slots)
    return ListOffsetsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=tuple(
            ListOffsetsTopicResponse(name=TopicName(name), partitions=tuple(parts))
            for name, parts in topics
        ),
    )


async def _ask_leaders(
    ctx: RequestContext,
    isolation: int,
    forward: list[tuple[BrokerEndpoint, list[tuple[str, ListOffsetsPartition]]]],
    slots: dict[tuple[str, int], tuple[list[ListOffsetsPartitionResponse], int]],
) -> None:
    """Forward each leader its partitions (as ListOffsets v8) and put its
    answers in their ``slots``; unanswered ones keep NOT_LEADER_OR_FOLLOWER."""
    requests = []
    for endpoint, wanted in forward:
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for name, part in wanted:
            by_topic.setdefault(name, []).append(part)
        request = v8.ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(isolation),
            topics=tuple(
                ListOffsetsTopic(name=TopicName(n), partitions=tuple(ps))
                for n, ps in by_topic.items()
            ),
        )
        requests.append((endpoint, request))
    for response in await ask_leaders(ctx, _LIST_OFFSETS, _FORWARD_VERSION, requests):
        if not isinstance(response, ListOffsetsResponse):
            continue
        for rt in response.topics:
            for rp in rt.partitions:
                slot = slots.get((str(rt.name), int(rp.partition_index)))
                if slot is not None:
                    slot[0][slot[1]] = rp
