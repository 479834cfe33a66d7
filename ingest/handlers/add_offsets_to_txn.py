"""AddOffsetsToTxn (key 25): a consumer group's offsets join a transaction
(TxnOffsetCommit then sends them; they count when the transaction commits).

The response is built as a version 3 entity (every version has its fields).
"""

from __future__ import annotations

from typing import Union

from kio.schema.add_offsets_to_txn import v0, v1, v2, v3
from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import NO_THROTTLE, compatible, coordinator, coordinator_error
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_group
from ingest.security.acl.model import AclOperation

__all__ = ["handle", "AddOffsetsToTxnRequest"]

AddOffsetsToTxnRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.AddOffsetsToTxnRequest,
    v1.AddOffsetsToTxnRequest,
    v2.AddOffsetsToTxnRequest,
    v3.AddOffsetsToTxnRequest,
]

_FENCED_SINCE = 2


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    code = coordinator_error(ctx, request.transactional_id)
    if code is None and not authorize_group(ctx, request.group_id, AclOperation.READ):
        code = ErrorCode.group_authorization_failed
    if code is None:
        if not request.group_id:
            code = ErrorCode.invalid_group_id
        else:
            code = await coordinator(ctx).add_offsets(
                request.transactional_id,
                int(request.producer_id),
                int(request.producer_epoch),
                request.group_id,
            )
    return AddOffsetsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=compatible(code, ctx.api_version, _FENCED_SINCE)
    )
