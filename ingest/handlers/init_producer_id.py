"""InitProducerId (key 22): producer ids for idempotent producers."""

from __future__ import annotations

import asyncio
from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        # Transactions are not implemented: say so with the error Kafka gives
        # a client that may not use transactional ids.
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.transactional_id_authorization_failed,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    current_id = int(getattr(request, "producer_id", -1))
    current_epoch = int(getattr(request, "producer_epoch", -1))
    if current_id >= 0 and 0 <= current_epoch < 32766:
        # KIP-360: an idempotent producer bumps its epoch to reset sequences.
        return {
            "throttle_time": 0,
            "error_code": 0,
            "producer_id": current_id,
            "producer_epoch": current_epoch + 1,
        }
    pid = await asyncio.to_thread(ctx.broker.store.allocate_producer_id)
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
