"""What the transaction handlers share: finding the coordinator, and the
error codes old request versions know."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from kio.static.primitive import i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl.enforce import authorize_transactional_id

if TYPE_CHECKING:
    from ingest.txn import TransactionCoordinator

__all__ = ["NO_THROTTLE", "coordinator_error", "refusal", "compatible", "coordinator"]

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def coordinator(ctx: RequestContext) -> TransactionCoordinator:
    return ctx.broker.txns


def refusal(ctx: RequestContext, transactional_id: str) -> ErrorCode | None:
    """Why ``transactional_id`` may not be used by this caller at all, or None."""
    if not transactional_id:
        return ErrorCode.invalid_request
    if not authorize_transactional_id(ctx, transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    return None


def coordinator_error(ctx: RequestContext, transactional_id: str) -> ErrorCode | None:
    """Why this broker cannot serve ``transactional_id`` here, or None: a
    refusal, or NOT_COORDINATOR when another broker of the cluster
    coordinates it (the client looks the coordinator up again)."""
    refused = refusal(ctx, transactional_id)
    if refused is not None:
        return refused
    cluster = ctx.broker.cluster
    if cluster.clustered and cluster.coordinator_for(transactional_id).node_id != cluster.node_id:
        return ErrorCode.not_coordinator
    return None


def compatible(code: ErrorCode, api_version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED is new in ``fenced_since``; older versions get
    INVALID_PRODUCER_EPOCH, as Kafka answers them."""
    if code == ErrorCode.producer_fenced and api_version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code
