"""OffsetForLeaderEpoch (key 23).

Each partition has had one leader epoch since it was created, so the end
offset of any epoch up to the current one is the log end.
"""

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
            log = ctx.broker.logs.partition(t.topic, p.partition)
            if log is None:
                parts.append(
                    {
                        "error_code": ErrorCode.unknown_topic_or_partition,
                        "partition": p.partition,
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                )
                continue
            current = int(getattr(p, "current_leader_epoch", -1))
            if current > log.leader_epoch:
                parts.append(
                    {
                        "error_code": ErrorCode.unknown_leader_epoch,
                        "partition": p.partition,
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                )
                continue
            if int(p.leader_epoch) > log.leader_epoch:
                parts.append(
                    {
                        "error_code": 0,
                        "partition": p.partition,
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                )
                continue
            parts.append(
                {
                    "error_code": 0,
                    "partition": p.partition,
                    "leader_epoch": log.leader_epoch,
                    "end_offset": log.high_watermark,
                }
            )
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
