"""Quotas as Produce and Fetch apply them: count the bytes, wait, answer the throttle.

A Produce request is counted when it arrives and, past its quota, waits
its throttle before it is served (:func:`admit_produce`), so a client that
keeps many requests in flight (librdkafka) is held to its rate; a Fetch is
counted once read and its response waits its throttle. Both responses carry
the throttle in ``throttle_time``. (Kafka answers KIP-219 clients at once
and mutes their connection instead: a Java client, which also backs off by
``throttle_time`` itself, waits up to twice as long here.)
"""

from __future__ import annotations

import asyncio
import datetime
from typing import TYPE_CHECKING, Any

from kio.static.primitive import i32Timedelta

from ingest.security.quota import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE

if TYPE_CHECKING:
    from ingest.handlers.base import RequestContext
    from ingest.security.quota_manager import QuotaManager

__all__ = ["active", "admit_produce", "fetch_throttle"]


def _quotas(ctx: RequestContext) -> QuotaManager | None:
    quotas: QuotaManager | None = getattr(ctx.broker, "quotas", None)
    return quotas if quotas is not None and quotas.active else None


async def _throttle_s(ctx: RequestContext, kind: str, nbytes: int) -> float:
    """Count ``nbytes``; past the quota, wait the throttle; returns it (s)."""
    quotas = _quotas(ctx)
    if quotas is None or nbytes <= 0:
        return 0.0
    session = ctx.session
    principal = session.principal if session is not None else "User:ANONYMOUS"
    user = principal.partition(":")[2]
    throttle = quotas.record(kind, user, ctx.client_id or "", nbytes)
    if throttle > 0:
        await asyncio.sleep(throttle)
    return throttle


def active(ctx: RequestContext) -> bool:
    """Whether any quota is set, so that requests have bytes to count."""
    return _quotas(ctx) is not None


async def admit_produce(ctx: RequestContext, request: Any) -> int:
    """Count a Produce request's record bytes on arrival; past the quota,
    wait the throttle before it is served. Returns the throttle in ms."""
    if _quotas(ctx) is None:  # no quota anywhere: nothing to count
        return 0
    nbytes = sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)
    return int(await _throttle_s(ctx, PRODUCER_BYTE_RATE, nbytes) * 1000)


async def fetch_throttle(ctx: RequestContext, response_bytes: int) -> i32Timedelta:
    """Count a Fetch response's record bytes; past the quota, wait the
    throttle before answering. Returns its ``throttle_time``."""
    seconds = await _throttle_s(ctx, CONSUMER_BYTE_RATE, response_bytes)
    return i32Timedelta.parse(datetime.timedelta(milliseconds=int(seconds * 1000)))
