"""SaslHandshake (key 17): the client picks a SASL mechanism.

Versions 0 and 1 are advertised: librdkafka (kcat, confluent-kafka) decides
whether a broker supports SASL handshakes at all from version 0 being in the
advertised range, and then sends version 1 because SaslAuthenticate is
advertised. A version 0 handshake would be followed by raw SASL tokens
outside Kafka framing, which this broker does not read: it is answered
UNSUPPORTED_VERSION and the connection closes.

On an authenticated connection a version 1 handshake with the same mechanism
begins a re-authentication (KIP-368); a different mechanism is refused with
ILLEGAL_SASL_STATE and the connection closes, as Kafka does. On a listener
without SASL the answer is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Union

from kio.schema.sasl_handshake import v0, v1
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = ["handle", "SaslHandshakeRequest"]

SaslHandshakeRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.SaslHandshakeRequest, v1.SaslHandshakeRequest
]


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    authenticator = ctx.broker.authenticator
    mechanisms = authenticator.mechanisms
    session = ctx.session
    if session is None or not session.listener.protocol.uses_sasl:
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    if isinstance(request, v0.SaslHandshakeRequest):
        session.fail()
        return SaslHandshakeResponse(
            error_code=ErrorCode.unsupported_version, mechanisms=mechanisms
        )
    if session.authenticated and request.mechanism != session.mechanism:
        session.fail()
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=mechanisms)
    if not authenticator.handshake(session, request.mechanism):
        return SaslHandshakeResponse(
            error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms
        )
    return SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=mechanisms)
