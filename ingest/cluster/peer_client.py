"""One Kafka request from this broker to another broker of its cluster.

A round trip opens a connection to ``endpoint`` (the caller picks the peer's
inter-broker listener), secured and authenticated as ``security`` says
(:mod:`ingest.cluster.peer_connection`; None: PLAINTEXT), sends one typed
request (kio entity, framed by :mod:`ingest.protocol.codec`), reads one
response and closes.

Guarantees: the call returns the decoded response entity or raises
(``OSError`` for a broker that cannot be reached or whose TLS fails,
``PeerAuthenticationError`` (a ``ConnectionError``) when it refuses this
broker's SASL credentials, ``TimeoutError`` when the
whole round trip takes longer than ``timeout_s``, ``ProtocolError`` for bytes
that do not decode, ``ConnectionError`` for a mismatched correlation id).
Nothing is retried here; callers decide what an unanswered peer means.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from ingest.cluster.peer_connection import PeerSecurity, open_peer_connection
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.codec import decode_response, encode_request

__all__ = ["peer_request"]

_correlation = itertools.count(1)


async def peer_request(
    endpoint: BrokerEndpoint,
    api_key: int,
    api_version: int,
    request: Any,
    timeout_s: float,
    client_id: str = "tidelake-peer",
    security: PeerSecurity | None = None,
) -> Any:
    """Send ``request`` (a kio entity of ``api_key`` at ``api_version``) to
    ``endpoint`` and return the decoded response entity."""
    correlation_id = next(_correlation)
    frame = encode_request(api_key, api_version, correlation_id, client_id, request)

    async def round_trip() -> Any:
        reader, writer = await open_peer_connection(
            endpoint.host, endpoint.port, security, timeout_s
        )
        try:
            writer.write(frame)
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
        finally:
            writer.close()
        got_id, response = decode_response(api_key, api_version, body)
        if got_id != correlation_id:
            raise ConnectionError(f"correlation id {got_id}, expected {correlation_id}")
        return response

    return await asyncio.wait_for(round_trip(), timeout_s)
