"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

With a transactional id the transaction coordinator answers (and fences an
earlier producer of that id); without one a fresh producer id, or (KIP-360) a
bumped epoch for the id the producer names.

The response is built as a version 4 entity (every version has the same
fields); the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Union

from kio.schema.init_producer_id import v0, v1, v2, v3, v4
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import compatible, coordinator, coordinator_error
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle", "InitProducerIdRequest"]

InitProducerIdRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.InitProducerIdRequest,
    v1.InitProducerIdRequest,
    v2.InitProducerIdRequest,
    v3.InitProducerIdRequest,
    v4.InitProducerIdRequest,
]

_MAX_EPOCH = 32766


def _response(code: ErrorCode, producer_id: int, epoch: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=code,
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )


_FENCED_SINCE = 4  # older versions are told INVALID_PRODUCER_EPOCH


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    current_id = int(getattr(request, "producer_id", -1))  # v3+
    current_epoch = int(getattr(request, "producer_epoch", -1))  # v3+
    tid = request.transactional_id
    if (denied := acl.init_producer_id_denied(ctx, request.transactional_id)) is not None:
        return _response(denied, -1, -1)
    if tid is not None:
        refused = coordinator_error(ctx, tid)
        if refused is not None:
            return _response(refused, -1, -1)
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        result = await coordinator(ctx).init_producer_id(tid, timeout_ms, current_id, current_epoch)
        return _response(
            compatible(result.error, ctx.api_version, _FENCED_SINCE),
            result.producer_id,
            result.producer_epoch,
        )
    if current_id >= 0 and 0 <= current_epoch < _MAX_EPOCH:
        # KIP-360: an idempotent producer bumps its epoch to reset sequences.
        return _response(ErrorCode.none, current_id, current_epoch + 1)
    pid = await asyncio.to_thread(ctx.broker.store.allocate_producer_id)
    return _response(ErrorCode.none, pid, 0)
