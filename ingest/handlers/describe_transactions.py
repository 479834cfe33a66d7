"""DescribeTransactions (key 65): the state of transactional ids, for admin
clients (``kafka-transactions.sh describe``, AdminClient.describeTransactions)."""

from __future__ import annotations

import datetime

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import NO_THROTTLE, coordinator, coordinator_error
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_transactional_id
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "DescribeTransactionsRequest"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# Kafka's -1 (no open transaction). kio's TZAware holds neither it nor
# milliseconds, its writer takes both: plain datetimes go into the entity.
_NO_TIME = _EPOCH - datetime.timedelta(milliseconds=1)


def _missing(tid: str, code: ErrorCode) -> TransactionState:
    return TransactionState(
        error_code=code,
        transactional_id=TransactionalId(tid),
        transaction_state="",
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(0)),
        transaction_start_time=_NO_TIME,  # type: ignore[arg-type]
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
        topics=(),
    )


async def _describe(ctx: RequestContext, tid: str) -> TransactionState:
    if not authorize_transactional_id(ctx, tid, AclOperation.DESCRIBE):
        return _missing(tid, ErrorCode.transactional_id_authorization_failed)
    refused = coordinator_error(ctx, tid)
    if refused is not None:
        return _missing(tid, refused)
    rec = await coordinator(ctx).describe(tid)
    if rec is None:
        return _missing(tid, ErrorCode.transactional_id_not_found)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(rec.partitions):
        by_topic.setdefault(topic, []).append(partition)
    start = _NO_TIME
    if rec.start_ms >= 0:
        start = _EPOCH + datetime.timedelta(milliseconds=rec.start_ms)
    return TransactionState(
        error_code=ErrorCode.none,
        transactional_id=TransactionalId(tid),
        transaction_state=rec.state.value,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=rec.timeout_ms)),
        transaction_start_time=start,  # type: ignore[arg-type]
        producer_id=ProducerId(rec.producer_id),
        producer_epoch=i16(rec.producer_epoch),
        topics=tuple(
            TopicData(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in by_topic.items()
        ),
    )


async def handle(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        throttle_time=NO_THROTTLE,
        transaction_states=tuple([await _describe(ctx, tid) for tid in request.transactional_ids]),
    )
