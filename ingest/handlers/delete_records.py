"""DeleteRecords (key 21): move a partition's log start offset forward.

The response is built as a version 2 entity (every version has the same
fields); the dispatcher narrows it to the version the client asked for.

A rack-routed client (``tidelake_rack=`` in its ``client.id``) asks the broker
of its rack Metadata named; for a partition led elsewhere that broker forwards
the deletion to the leader and passes its answer back
(:mod:`ingest.handlers.led_elsewhere`).
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.delete_records import v0, v1, v2
from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsTopic
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import ask_leaders, leader_elsewhere
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl

__all__ = ["handle", "DeleteRecordsRequest"]

DeleteRecordsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.DeleteRecordsRequest,
    v1.DeleteRecordsRequest,
    v2.DeleteRecordsRequest,
]

_DELETE_RECORDS = 21
_FORWARD_VERSION = 2
_Slots = dict[tuple[str, int], tuple[list[DeleteRecordsPartitionResult], int]]


def _result(index: int, low_watermark: int, code: ErrorCode) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=i32(index), low_watermark=i64(low_watermark), error_code=code
    )


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    logs = ctx.broker.logs
    topics = []
    # partitions of a rack-routed client that another broker leads
    forward: dict[int, tuple[BrokerEndpoint, list[tuple[str, DeleteRecordsPartition]]]] = {}
    slots: _Slots = {}
    for t in request.topics:
        parts: list[DeleteRecordsPartitionResult] = []
        for p in t.partitions:
            index = int(p.partition_index)
            if (denied := acl.topic_denied(ctx, t.name, acl.AclOperation.DELETE)) is not None:
                parts.append(_result(index, -1, denied[0]))
                continue
            log = logs.partition(t.name, index)
            if log is None and (leader := leader_elsewhere(ctx, t.name, index)) is not None:
                asked = DeleteRecordsPartition(partition_index=i32(index), offset=p.offset)
                forward.setdefault(leader.node_id, (leader, []))[1].append((t.name, asked))
                slots[(str(t.name), index)] = (parts, len(parts))
                parts.append(_result(index, -1, ErrorCode.not_leader_or_follower))
                continue
            if log is None:
                parts.append(_result(index, -1, logs.partition_error(t.name, index)))
                continue
            try:
                low = await log.delete_records(int(p.offset))
            except KafkaError as exc:
                parts.append(_result(index, -1, ErrorCode(exc.error_code)))
                continue
            parts.append(_result(index, low, ErrorCode.none))
        topics.append((t.name, parts))
    if forward:
        await _ask_leaders(ctx, request.timeout, list(forward.values()), slots)
    return DeleteRecordsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=tuple(
            DeleteRecordsTopicResult(name=TopicName(name), partitions=tuple(parts))
            for name, parts in topics
        ),
    )


async def _ask_leaders(
    ctx: RequestContext,
    wait: i32Timedelta,
    forward: list[tuple[BrokerEndpoint, list[tuple[str, DeleteRecordsPartition]]]],
    slots: _Slots,
) -> None:
    """Forward each leader its partitions (as DeleteRecords v2) and put its
    answers in their ``slots``; unanswered ones keep NOT_LEADER_OR_FOLLOWER."""
    requests = []
    for endpoint, wanted in forward:
        by_topic: dict[str, list[DeleteRecordsPartition]] = {}
        for name, part in wanted:
            by_topic.setdefault(name, []).append(part)
        request = v2.DeleteRecordsRequest(
            topics=tuple(
                DeleteRecordsTopic(name=TopicName(n), partitions=tuple(ps))
                for n, ps in by_topic.items()
            ),
            timeout=wait,
        )
        requests.append((endpoint, request))
    for response in await ask_leaders(ctx, _DELETE_RECORDS, _FORWARD_VERSION, requests):
        if not isinstance(response, DeleteRecordsResponse):
            continue
        for rt in response.topics:
            for rp in rt.partitions:
                slot = slots.get((str(rt.name), int(rp.partition_index)))
                if slot is not None:
                    slot[0][slot[1]] = rp
