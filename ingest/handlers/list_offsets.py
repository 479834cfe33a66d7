"""ListOffsets (key 2): earliest, latest, max timestamp, or by timestamp."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

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
                        "error_code": ErrorCode.unknown_topic_or_partition,
                        "timestamp": -1,
                        "offset": -1,
                    }
                )
                continue
            offset, ts = await log.offset_for(int(p.timestamp))
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": 0,
                    "timestamp": ts,
                    "offset": offset,
                    "leader_epoch": log.leader_epoch if offset >= 0 else -1,
                }
            )
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
