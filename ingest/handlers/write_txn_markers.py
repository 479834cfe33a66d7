"""WriteTxnMarkers (key 27): a transaction coordinator asks the broker that
leads partitions of a transaction to write its commit or abort markers there
(brokers of one cluster send it to one another; clients never do).

Only brokers may send it: with an authorizer on, it needs CLUSTER_ACTION on
the cluster, as in Kafka. A partition this broker does not lead answers
NOT_LEADER_OR_FOLLOWER (the coordinator retries once it has moved).
"""

from __future__ import annotations

from kio.schema.types import TopicName
from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v1.response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from kio.static.primitive import i32

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_cluster
from ingest.security.acl.model import AclOperation
from ingest.txn.adapters import LogMarkerWriter

__all__ = ["handle", "WriteTxnMarkersRequest"]


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    writer = LogMarkerWriter(ctx.broker.logs)
    results: list[WritableTxnMarkerResult] = []
    for marker in request.markers:
        wanted = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
        if allowed:
            codes = await writer.write_markers(
                int(marker.producer_id),
                int(marker.producer_epoch),
                marker.transaction_result,
                int(marker.coordinator_epoch),
                wanted,
            )
        else:
            codes = {tp: ErrorCode.cluster_authorization_failed for tp in wanted}
        by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
        for (topic, index), code in codes.items():
            by_topic.setdefault(topic, []).append(
                WritableTxnMarkerPartitionResult(partition_index=i32(index), error_code=code)
            )
        results.append(
            WritableTxnMarkerResult(
                producer_id=marker.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(name=TopicName(t), partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return WriteTxnMarkersResponse(markers=tuple(results))
