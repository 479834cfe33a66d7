"""DescribeProducers (key 61): the producers a partition knows (id, epoch,
last sequence, the coordinator epoch of their last marker and the first
offset of their open transaction), as ``kafka-transactions.sh
describe-producers`` and ``find-hanging`` ask the partition's leader. Needs
READ on the topic, as in Kafka.

A rack-routed client (``tidelake_rack=`` in its client.id) asks the broker of
its rack that Metadata named; for a partition led elsewhere that broker
forwards the question to the leader and passes its answer back
(:mod:`ingest.handlers.led_elsewhere`)."""

from __future__ import annotations

import datetime

from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import ask_leaders, leader_elsewhere
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_topic
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "DescribeProducersRequest"]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_DESCRIBE_PRODUCERS, _FORWARD_VERSION = 61, 0
_Slots = dict[tuple[str, int], tuple[list[PartitionResponse], int]]


def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    def failed(code: ErrorCode) -> PartitionResponse:
        return PartitionResponse(
            partition_index=i32(index), error_code=code, error_message=None, active_producers=()
        )

    if not authorize_topic(ctx, topic, AclOperation.READ):
        return failed(ErrorCode.topic_authorization_failed)
    plog = ctx.broker.logs.partition(topic, index)
    if plog is None:
        if ctx.broker.logs.has_partition(topic, index):
            return failed(ErrorCode.not_leader_or_follower)
        return failed(ErrorCode.unknown_topic_or_partition)
    return PartitionResponse(
        partition_index=i32(index),
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=tuple(
            ProducerState(
                producer_id=ProducerId(pid),
                producer_epoch=i32(epoch),
                last_sequence=i32(last_seq),
                last_timestamp=i64(-1),  # not kept here
                coordinator_epoch=i32(plog.txn.coordinator_epoch(pid)),
                current_txn_start_offset=i64(plog.txn.ongoing.get(pid, -1)),
            )
            for pid, epoch, last_seq in plog.producers.snapshot()
        ),
    )


async def handle(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    logs = ctx.broker.logs
    topics: list[tuple[TopicName, list[PartitionResponse]]] = []
    # partitions a rack-routed client asks about that another broker leads
    forward: dict[int, tuple[BrokerEndpoint, list[tuple[str, int]]]] = {}
    slots: _Slots = {}
    for t in request.topics:
        parts: list[PartitionResponse] = []
        for p in t.partition_indexes:
            index = int(p)
            answer = _partition(ctx, t.name, index)
            if (
                answer.error_code == ErrorCode.not_leader_or_follower
                and logs.partition(t.name, index) is None
                and (leader := leader_elsewhere(ctx, t.name, index)) is not None
            ):
                forward.setdefault(leader.node_id, (leader, []))[1].append((str(t.name), index))
                slots[(str(t.name), index)] = (parts, len(parts))
            parts.append(answer)
        topics.append((t.name, parts))
    if forward:
        await _ask_leaders(ctx, list(forward.values()), slots)
    return DescribeProducersResponse(
        throttle_time=_NO_THROTTLE,
        topics=tuple(TopicResponse(name=name, partitions=tuple(ps)) for name, ps in topics),
    )


async def _ask_leaders(
    ctx: RequestContext,
    forward: list[tuple[BrokerEndpoint, list[tuple[str, int]]]],
    slots: _Slots,
) -> None:
    """Forward each leader its partitions and put its answers in their
    ``slots``; unanswered ones keep NOT_LEADER_OR_FOLLOWER (retriable)."""
    requests = []
    for endpoint, wanted in forward:
        by_topic: dict[str, list[i32]] = {}
        for name, index in wanted:
            by_topic.setdefault(name, []).append(i32(index))
        request = DescribeProducersRequest(
            topics=tuple(
                TopicRequest(name=TopicName(n), partition_indexes=tuple(ps))
                for n, ps in by_topic.items()
            )
        )
        requests.append((endpoint, request))
    for response in await ask_leaders(ctx, _DESCRIBE_PRODUCERS, _FORWARD_VERSION, requests):
        if not isinstance(response, DescribeProducersResponse):
            continue
        for rt in response.topics:
            for rp in rt.partitions:
                slot = slots.get((str(rt.name), int(rp.partition_index)))
                if slot is not None:
                    slot[0][slot[1]] = rp
