"""SaslAuthenticate (key 36): one step of the SASL exchange.

A failed step answers SASL_AUTHENTICATION_FAILED and the connection closes
once that response is written (Kafka's behaviour); a step out of order
answers ILLEGAL_SASL_STATE and closes likewise. Built as a version 2 entity;
the dispatcher narrows it for older clients. A success carries the session
lifetime (KIP-368; v1+), 0 when re-authentication is off.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.sasl_authenticate import v0, v1, v2
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.static.primitive import i64Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = ["handle", "SaslAuthenticateRequest"]

SaslAuthenticateRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.SaslAuthenticateRequest, v1.SaslAuthenticateRequest, v2.SaslAuthenticateRequest
]


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or not session.listener.protocol.uses_sasl:
        if session is not None:
            session.fail()
        return SaslAuthenticateResponse(
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SASL is not enabled on this listener",
            auth_bytes=b"",
        )
    result = await ctx.broker.authenticator.authenticate(session, request.auth_bytes)
    if result.error is not None:
        code = (
            ErrorCode.illegal_sasl_state
            if result.illegal_state
            else ErrorCode.sasl_authentication_failed
        )
        return SaslAuthenticateResponse(error_code=code, error_message=result.error, auth_bytes=b"")
    return SaslAuthenticateResponse(
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=result.auth_bytes,
        session_lifetime=i64Timedelta.parse(
            datetime.timedelta(milliseconds=result.session_lifetime_ms)
        ),
    )
