"""AddPartitionsToTxn (key 24): partitions join a producer's transaction.

Versions 0-3 carry one transaction (answered as a v3 entity); version 4 a
list of them, each either adding or, with ``verify_only``, asking whether its
partitions are in the transaction (answered as a v4 entity). A partition of a
topic that does not exist fails with UNKNOWN_TOPIC_OR_PARTITION and the
others of that transaction with OPERATION_NOT_ATTEMPTED, as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Union

from kio.schema.add_partitions_to_txn import v0, v1, v2, v3, v4
from kio.schema.add_partitions_to_txn.v3 import response as old
from kio.schema.add_partitions_to_txn.v4 import response as new
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i32

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import NO_THROTTLE, compatible, coordinator, coordinator_error
from ingest.protocol.errors import ErrorCode

__all__ = ["handle", "AddPartitionsToTxnRequest"]

AddPartitionsToTxnRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.AddPartitionsToTxnRequest,
    v1.AddPartitionsToTxnRequest,
    v2.AddPartitionsToTxnRequest,
    v3.AddPartitionsToTxnRequest,
    v4.AddPartitionsToTxnRequest,
]

_FENCED_SINCE = 2
Partition = tuple[str, int]


class _Topic(Protocol):
    @property
    def name(self) -> TopicName: ...

    @property
    def partitions(self) -> tuple[i32, ...]: ...


async def _one(
    ctx: RequestContext,
    tid: str,
    producer_id: int,
    epoch: int,
    topics: Sequence[_Topic],
    verify_only: bool,
) -> dict[Partition, ErrorCode]:
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    refused = coordinator_error(ctx, tid)
    if refused is not None:
        return {tp: refused for tp in wanted}
    unknown = {tp for tp in wanted if not ctx.broker.logs.has_partition(*tp)}
    if unknown:
        return {
            tp: ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in wanted
        }
    txns = coordinator(ctx)
    if verify_only:
        return await txns.verify_partitions(tid, producer_id, epoch, wanted)
    code = await txns.add_partitions(tid, producer_id, epoch, wanted)
    return {tp: compatible(code, ctx.api_version, _FENCED_SINCE) for tp in wanted}


def _topic_results(
    results: dict[Partition, ErrorCode],
) -> tuple[new.AddPartitionsToTxnTopicResult, ...]:
    by_topic: dict[str, list[new.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            new.AddPartitionsToTxnPartitionResult(
                partition_index=i32(partition), partition_error_code=code
            )
        )
    return tuple(
        new.AddPartitionsToTxnTopicResult(name=TopicName(t), results_by_partition=tuple(r))
        for t, r in by_topic.items()
    )


async def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> old.AddPartitionsToTxnResponse | new.AddPartitionsToTxnResponse:
    if isinstance(request, v4.AddPartitionsToTxnRequest):
        out: list[new.AddPartitionsToTxnResult] = []
        for txn in request.transactions:
            results = await _one(
                ctx,
                txn.transactional_id,
                int(txn.producer_id),
                int(txn.producer_epoch),
                txn.topics,
                txn.verify_only,
            )
            out.append(
                new.AddPartitionsToTxnResult(
                    transactional_id=TransactionalId(txn.transactional_id),
                    topic_results=_topic_results(results),
                )
            )
        return new.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(out)
        )
    results = await _one(
        ctx,
        request.v3_and_below_transactional_id,
        int(request.v3_and_below_producer_id),
        int(request.v3_and_below_producer_epoch),
        request.v3_and_below_topics,
        verify_only=False,
    )
    return old.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            old.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=tuple(
                    old.AddPartitionsToTxnPartitionResult(
                        partition_index=r.partition_index,
                        partition_error_code=r.partition_error_code,
                    )
                    for r in t.results_by_partition
                ),
            )
            for t in _topic_results(results)
        ),
    )
