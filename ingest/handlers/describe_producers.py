"""DescribeProducers (key 61): the producers a partition knows (id, epoch,
last sequence, the coordinator epoch of their last marker and the first
offset of their open transaction), as ``kafka-transactions.sh
describe-producers`` and ``find-hanging`` ask the partition's leader. Needs
READ on the topic, as in Kafka."""

from __future__ import annotations

import datetime

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.types import ProducerId
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_topic
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "DescribeProducersRequest"]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


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
    return DescribeProducersResponse(
        throttle_time=_NO_THROTTLE,
        topics=tuple(
            TopicResponse(
                name=t.name,
                partitions=tuple(_partition(ctx, t.name, int(p)) for p in t.partition_indexes),
            )
            for t in request.topics
        ),
    )
