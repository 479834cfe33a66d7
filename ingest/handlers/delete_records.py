"""DeleteRecords (key 21): move a partition's log start offset forward."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            log = ctx.broker.logs.partition(t.name, p.partition_index)
            if log is None:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": ErrorCode.unknown_topic_or_partition,
                    }
                )
                continue
            try:
                low = await log.delete_records(int(p.offset))
                parts.append(
                    {"partition_index": p.partition_index, "low_watermark": low, "error_code": 0}
                )
            except KafkaError as exc:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": exc.error_code,
                    }
                )
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
