"""Envelope (key 58): inside a cluster, a routed produce from a broker of the
client's rack (see :mod:`ingest.zone_router.leader` for who may send it and
what it carries). Kafka uses Envelope to forward a client's request between
brokers; ours forwards a Produce whose records wait in object storage."""

from __future__ import annotations

from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse

from ingest.handlers import produce
from ingest.handlers.base import RequestContext
from ingest.zone_router import serve

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
    return await serve(ctx, request, produce.handle_direct)
