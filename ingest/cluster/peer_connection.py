"""A connection from this broker to another broker of its cluster, secured
as the inter-broker listener asks: TLS (Python's ``ssl``), then SASL as a
Kafka client does it (SaslHandshake v1, then SaslAuthenticate v1 frames
through :mod:`ingest.protocol.codec`) with PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512 (RFC 5802 / RFC 7677, on the primitives of
:mod:`ingest.security.scram`).

:class:`PeerSecurity` holds what the broker's settings say (Kafka's
``sasl.mechanism.inter.broker.protocol`` plus the listener's credentials and
trust store); the broker builds one at start (:meth:`PeerSecurity.from_settings`
refuses settings that cannot work, naming the missing keys) and passes it to
every inter-broker call.

Guarantees of :func:`open_peer_connection`: it returns a connection on which
the peer has accepted this broker (TLS verified, SASL done), or raises:
``OSError`` when the peer cannot be reached or TLS fails (``ssl.SSLError`` is
one), :class:`PeerAuthenticationError` (a ``ConnectionError``) when the peer
refuses the mechanism or the credentials (its message carries the peer's
error), ``TimeoutError`` past ``timeout_s``. The connection is closed on
every failure.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
import os
import ssl
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from ingest.errors import ConfigError
from ingest.protocol.codec import decode_response, encode_request
from ingest.security.listeners import SecurityProtocol
from ingest.security.scram import (
    MECHANISMS,
    credential_from_salted_password,
    salted_password,
    scram_hmac,
)

if TYPE_CHECKING:
    from ingest.config import BrokerConfig

__all__ = [
    "PEER_MECHANISMS",
    "PeerAuthenticationError",
    "PeerSecurity",
    "ScramClient",
    "open_peer_connection",
]

PEER_MECHANISMS = ("PLAIN", *MECHANISMS)
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
_CLIENT_ID = "tidelake-inter-broker"
_correlation = itertools.count(1)


class PeerAuthenticationError(ConnectionError):
    """The peer refused this broker's SASL mechanism or credentials."""


@dataclass(frozen=True, slots=True)
class PeerSecurity:
    """How this broker connects to its peers: the inter-broker listener's
    security protocol and what it needs (SASL mechanism and credentials,
    trust store, optional client certificate for mTLS)."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    check_hostname: bool = True
    _context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.protocol.uses_sasl:
            if self.sasl_mechanism not in PEER_MECHANISMS:
                raise ConfigError(
                    "inter_broker_sasl_mechanism",
                    f"{self.sasl_mechanism!r}: one of {list(PEER_MECHANISMS)}",
                )
            if not self.username or not self.password:
                raise ConfigError(
                    "inter_broker_sasl_username", "SASL needs a username and a password"
                )
        if self.protocol.uses_tls and self._context is None:
            object.__setattr__(self, "_context", self._make_context())

    def _make_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        try:
            if self.cafile:
                ctx.load_verify_locations(self.cafile)
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "inter_broker_ssl_cafile", f"cannot load {self.cafile}: {exc}"
            ) from exc
        if self.certfile:
            try:
                ctx.load_cert_chain(self.certfile, self.keyfile or None)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    "inter_broker_ssl_certfile", f"cannot load {self.certfile}: {exc}"
                ) from exc
        return ctx

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self._context

    @classmethod
    def from_settings(
        cls, config: BrokerConfig, protocol: SecurityProtocol, client_auth: str = "none"
    ) -> PeerSecurity:
        """The security of calls to the inter-broker listener, whose protocol
        is ``protocol`` and whose ``ssl_client_auth`` is ``client_auth``.
        Raises ``ConfigError`` naming every missing key."""
        password = config.inter_broker_sasl_password
        missing: list[str] = []
        if protocol.uses_sasl:
            if config.inter_broker_sasl_mechanism is None:
                missing.append("inter_broker_sasl_mechanism")
            if not config.inter_broker_sasl_username:
                missing.append("inter_broker_sasl_username")
            if password is None or not password.get_secret_value():
                missing.append("inter_broker_sasl_password")
        cafile = config.inter_broker_ssl_cafile or config.ssl_cafile
        if protocol.uses_tls:
            if not cafile:
                missing.append("inter_broker_ssl_cafile")
            if client_auth == "required" and not config.inter_broker_ssl_certfile:
                missing.append("inter_broker_ssl_certfile")
        if missing:
            raise ConfigError(
                missing[0],
                f"the inter-broker listener (inter_broker_listener_name) uses {protocol.value}: "
                f"set {', '.join(missing)}, or name a PLAINTEXT listener the other brokers "
                "reach",
            )
        for key in (
            "inter_broker_ssl_cafile",
            "inter_broker_ssl_certfile",
            "inter_broker_ssl_keyfile",
        ):
            path = getattr(config, key)
            if path and not os.path.isfile(path):
                raise ConfigError(key, f"no such file {path}")
        return cls(
            protocol,
            config.inter_broker_sasl_mechanism if protocol.uses_sasl else None,
            config.inter_broker_sasl_username if protocol.uses_sasl else None,
            password.get_secret_value() if password is not None and protocol.uses_sasl else None,
            cafile if protocol.uses_tls else None,
            config.inter_broker_ssl_certfile if protocol.uses_tls else None,
            config.inter_broker_ssl_keyfile if protocol.uses_tls else None,
            config.inter_broker_ssl_check_hostname,
        )


PLAINTEXT = PeerSecurity()


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


@functools.lru_cache(maxsize=16)
def _salted(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return salted_password(mechanism, password, salt, iterations)


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802 without channel
    binding, as Kafka's clients run it): ``first()``, ``final(server_first)``,
    then ``verify(server_final)``. Raises :class:`PeerAuthenticationError`
    for a server message that is malformed or does not prove the server
    knows the credential."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={_escape_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode(errors="replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise PeerAuthenticationError(f"malformed SCRAM server-first-message: {exc}") from None
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise PeerAuthenticationError("SCRAM server nonce does not extend the client's")
        salted = _salted(self.mechanism, self._password, salt, iterations)
        try:
            keys = credential_from_salted_password(salted, salt, iterations, self.mechanism)
        except ValueError as exc:
            raise PeerAuthenticationError(f"SCRAM server-first-message refused: {exc}") from None
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = scram_hmac(self.mechanism, salted, b"Client Key")
        signature = scram_hmac(self.mechanism, keys.stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = scram_hmac(self.mechanism, keys.server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        if not self._server_signature:
            raise PeerAuthenticationError("SCRAM server-final-message before client-final")
        if text.startswith("e="):
            raise PeerAuthenticationError(f"SCRAM refused by the server: {text[2:]}")
        if text != "v=" + base64.b64encode(self._server_signature).decode():
            raise PeerAuthenticationError("SCRAM server signature does not match")


async def _round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int, request: Any
) -> Any:
    correlation_id = next(_correlation)
    writer.write(encode_request(api_key, 1, correlation_id, _CLIENT_ID, request))
    await writer.drain()
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    got_id, response = decode_response(api_key, 1, await reader.readexactly(size))
    if got_id != correlation_id:
        raise ConnectionError(f"correlation id {got_id}, expected {correlation_id}")
    return response


async def _authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: PeerSecurity
) -> None:
    mechanism, user, password = security.sasl_mechanism, security.username, security.password
    assert mechanism is not None and user is not None and password is not None  # __post_init__
    shake = await _round_trip(
        reader, writer, _SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=mechanism)
    )
    assert isinstance(shake, SaslHandshakeResponse)
    if shake.error_code != 0:
        raise PeerAuthenticationError(
            f"peer does not offer SASL {mechanism} (it offers {list(shake.mechanisms)})"
        )

    async def step(auth_bytes: bytes) -> bytes:
        answer = await _round_trip(
            reader, writer, _SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=auth_bytes)
        )
        assert isinstance(answer, SaslAuthenticateResponse)
        if answer.error_code != 0:
            raise PeerAuthenticationError(
                f"SASL_AUTHENTICATION_FAILED as {user} with {mechanism}: {answer.error_message}"
            )
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await step(b"\0" + user.encode() + b"\0" + password.encode())
        return
    scram = ScramClient(mechanism, user, password)
    server_first = await step(scram.first())
    # PBKDF2 (cached per salt): off the event loop
    client_final = await asyncio.to_thread(scram.final, server_first)
    scram.verify(await step(client_final))


async def open_peer_connection(
    host: str, port: int, security: PeerSecurity | None, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the peer at ``host``:``port`` on which it accepted
    this broker as ``security`` says (None: PLAINTEXT)."""
    security = security or PLAINTEXT

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        context = security.ssl_context
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context is not None else None
        )
        try:
            if security.protocol.uses_sasl:
                await _authenticate(reader, writer, security)
        except BaseException:
            writer.close()
            raise
        return reader, writer

    return await asyncio.wait_for(connect(), timeout_s)
