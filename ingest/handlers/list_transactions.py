"""ListTransactions (key 66): transactional ids this broker coordinates (an
admin client asks every broker),
filtered by state, producer id (v0), how long they have been open (v1) and a
regular expression over the id (v2); ids the caller may not DESCRIBE are left
out, as Kafka leaves them out."""

from __future__ import annotations

import re
from typing import Union

from kio.schema.list_transactions import v0, v1, v2
from kio.schema.list_transactions.v2.response import ListTransactionsResponse, TransactionState
from kio.schema.types import ProducerId, TransactionalId

from ingest.handlers.base import RequestContext
from ingest.handlers.txn_common import NO_THROTTLE, coordinator
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_transactional_id
from ingest.security.acl.model import AclOperation
from ingest.txn import TxnState

__all__ = ["handle", "ListTransactionsRequest"]

ListTransactionsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.ListTransactionsRequest,
    v1.ListTransactionsRequest,
    v2.ListTransactionsRequest,
]

_STATES = {s.value for s in TxnState}


def _response(
    code: ErrorCode, unknown: tuple[str, ...] = (), states: tuple[TransactionState, ...] = ()
) -> ListTransactionsResponse:
    return ListTransactionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=states,
    )


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    wanted_states = set(request.state_filters)
    unknown = tuple(s for s in request.state_filters if s not in _STATES)
    pids = {int(p) for p in request.producer_id_filters}
    min_ms = int(getattr(request, "duration_filter", -1))  # v1+
    pattern_text = getattr(request, "transactional_id_pattern", None)  # v2+
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return _response(ErrorCode.invalid_regular_expression)
    now = ctx.broker.txns.now_ms()
    out: list[TransactionState] = []
    for rec in await coordinator(ctx).list():
        if wanted_states and rec.state.value not in wanted_states:
            continue
        if pids and rec.producer_id not in pids:
            continue
        if min_ms >= 0 and (rec.start_ms < 0 or now - rec.start_ms < min_ms):
            continue
        if pattern is not None and pattern.fullmatch(rec.transactional_id) is None:
            continue
        if not authorize_transactional_id(ctx, rec.transactional_id, AclOperation.DESCRIBE):
            continue
        out.append(
            TransactionState(
                transactional_id=TransactionalId(rec.transactional_id),
                producer_id=ProducerId(rec.producer_id),
                transaction_state=rec.state.value,
            )
        )
    return _response(ErrorCode.none, unknown, tuple(out))
