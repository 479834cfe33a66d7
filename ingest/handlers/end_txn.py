"""EndTxn (key 26): commit or abort a producer's transaction.

The answer comes once the outcome is stored and the markers are written (or,
when a partition cannot take its marker now, queued for the coordinator's
retry; the producer's next transaction waits for it). Built as a version 4
entity (every version has its fields).
"""

from __future__ import annotations

from typing import Union

from kio.schema.end_txn import v0, v1, v2, v3, v4
from kio.schema.end_txn.v4.response import EndTxnResponse

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import NO_THROTTLE, compatible, coordinator, coordinator_error

__all__ = ["handle", "EndTxnRequest"]

EndTxnRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.EndTxnRequest,
    v1.EndTxnRequest,
    v2.EndTxnRequest,
    v3.EndTxnRequest,
    v4.EndTxnRequest,
]

_FENCED_SINCE = 2


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    code = coordinator_error(ctx, request.transactional_id)
    if code is None:
        code = await coordinator(ctx).end_txn(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            request.committed,
        )
    return EndTxnResponse(
        throttle_time=NO_THROTTLE, error_code=compatible(code, ctx.api_version, _FENCED_SINCE)
    )
