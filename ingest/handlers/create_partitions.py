"""CreatePartitions (key 37)."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import KafkaError

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    for t in request.topics:
        try:
            await ctx.broker.logs.create_partitions(
                t.name, int(t.count), validate_only=bool(request.validate_only)
            )
            results.append({"name": t.name, "error_code": 0})
        except KafkaError as exc:
            results.append(
                {"name": t.name, "error_code": exc.error_code, "error_message": exc.message}
            )
    return {"throttle_time": 0, "results": results}
