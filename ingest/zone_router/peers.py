"""Envelope round trips from a proxy broker to partition leaders, over a few
kept-open connections per leader (one request at a time on each), each opened
on the leader's inter-broker listener with this broker's TLS and SASL
settings (:class:`~ingest.cluster.peer_connection.PeerSecurity`)."""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections.abc import Awaitable, Callable

from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse

from ingest.cluster.peer_connection import PeerSecurity, open_peer_connection
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.codec import decode_response, encode_request

__all__ = ["PeerConnections", "Sender"]

Sender = Callable[[BrokerEndpoint, EnvelopeRequest, float], Awaitable[EnvelopeResponse]]
"""Sends one Envelope to a broker and returns its answer, or raises: OSError
(EOFError, ConnectionError) when the broker cannot be reached or the
connection breaks, TimeoutError after ``timeout_s``, ProtocolError for bytes
that do not decode."""

_ENVELOPE, _VERSION = 58, 0
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class PeerConnections:
    def __init__(
        self,
        client_id: str = "tidelake-zone-router",
        max_idle: int = 8,
        security: PeerSecurity | None = None,
    ) -> None:
        self._client_id = client_id
        self._security = security
        self._max_idle = max_idle
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._correlation = itertools.count(1)

    async def send(
        self, endpoint: BrokerEndpoint, request: EnvelopeRequest, timeout_s: float
    ) -> EnvelopeResponse:
        where = (endpoint.host, endpoint.port)
        idle = self._idle.get(where)
        conn = idle.pop() if idle else None
        correlation_id = next(self._correlation)
        frame = encode_request(_ENVELOPE, _VERSION, correlation_id, self._client_id, request)

        async def round_trip() -> EnvelopeResponse:
            nonlocal conn
            if conn is None:
                conn = await open_peer_connection(*where, self._security, timeout_s)
            reader, writer = conn
            writer.write(frame)
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            got_id, response = decode_response(_ENVELOPE, _VERSION, await reader.readexactly(size))
            if got_id != correlation_id:
                raise ConnectionError(f"correlation id {got_id}, expected {correlation_id}")
            assert isinstance(response, EnvelopeResponse)
            return response

        try:
            response = await asyncio.wait_for(round_trip(), timeout_s)
        except BaseException:
            if conn is not None:
                conn[1].close()
            raise
        assert conn is not None
        pool = self._idle.setdefault(where, [])
        if len(pool) < self._max_idle:
            pool.append(conn)
        else:
            conn[1].close()
        return response

    def close(self) -> None:
        for pool in self._idle.values():
            for _, writer in pool:
                writer.close()
        self._idle.clear()
