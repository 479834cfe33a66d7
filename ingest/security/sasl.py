"""Per-connection security state and the SASL exchange (PLAIN,
SCRAM-SHA-256/512, OAUTHBEARER) with re-authentication (KIP-368).

A :class:`SecuritySession` lives on each connection. On a SASL listener it
admits only ApiVersions, SaslHandshake and SaslAuthenticate until the client
has authenticated; a failed authentication marks the connection to be closed
once the error response is written, as Kafka does.

Re-authentication: with ``connections_max_reauth_ms`` set, a successful
authentication gives the connection a session lifetime (the setting, or less
when an OAUTHBEARER token expires sooner), returned to the client in
SaslAuthenticate v1+. The client re-authenticates on the same connection
(SaslHandshake + SaslAuthenticate again, same mechanism, same principal);
once the session has expired, any request other than a SaslHandshake
closes the connection, as Kafka's broker does.

:class:`SaslAuthenticator` runs the mechanisms against a
:class:`~ingest.security.credentials.CredentialStore`; it does no socket I/O
(store lookups and PBKDF2 run in a worker thread).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ingest.security.credentials import CredentialStore
from ingest.security.listeners import Listener
from ingest.security.oauth import OAuthError, TokenValidator, error_json, parse_initial_response
from ingest.security.scram import MECHANISMS, ScramError, ScramServer, verify_password
from ingest.security.tls import principal_of

__all__ = ["ANONYMOUS", "AuthResult", "SaslAuthenticator", "SecuritySession", "SUPPORTED"]

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED = ("PLAIN", *MECHANISMS, OAUTHBEARER)
# what a SASL connection may send before it has authenticated
_PRE_AUTH_APIS = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate


@dataclass(frozen=True, slots=True)
class AuthResult:
    """One SaslAuthenticate step: ``error`` is None on success (or on a step
    that continues the exchange), else the message for the client."""

    auth_bytes: bytes = b""
    error: str | None = None
    illegal_state: bool = False
    session_lifetime_ms: int = 0  # 0: the session does not expire


class SecuritySession:
    """The security state of one connection."""

    def __init__(self, listener: Listener, close_delay_s: float = 0.1) -> None:
        self.listener = listener
        # how long a connection that failed to authenticate stays open after
        # the error response (clients read the error before the close)
        self.close_delay_s = close_delay_s
        self.principal = ANONYMOUS
        self.authenticated = not listener.protocol.uses_sasl
        self.mechanism: str | None = None
        self.close_after_response = False
        self._scram: ScramServer | None = None
        # KIP-368: when the authenticated session ends (time.monotonic()), or None
        self.expires_at: float | None = None
        self.reauthenticating = False  # a SaslHandshake began a re-authentication

    def on_connected(self, transport: Any) -> None:
        """Take the principal from a verified client certificate (mTLS)."""
        if self.listener.protocol.uses_tls:
            ssl_object = transport.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert() if ssl_object is not None else None
            principal = principal_of(cert)
            if principal is not None:
                self.principal = principal

    def admits(self, api_key: int) -> bool:
        return self.refusal(api_key) is None

    def refusal(self, api_key: int, now: float | None = None) -> str | None:
        """Why a request with ``api_key`` may not be served now, or None."""
        if self.close_after_response:
            return "authentication failed"
        if not self.authenticated:
            return None if api_key in _PRE_AUTH_APIS else "request before SASL authentication"
        if self.expires_at is None or api_key == 17:  # SaslHandshake begins a re-authentication
            return None
        if self.reauthenticating and api_key == 36:
            return None
        if (time.monotonic() if now is None else now) >= self.expires_at:
            return "SASL session expired without re-authentication"
        return None

    def fail(self) -> None:
        self.close_after_response = True


class SaslAuthenticator:
    """The SASL mechanisms a broker offers, over one credential store."""

    def __init__(
        self,
        credentials: CredentialStore,
        mechanisms: Sequence[str],
        oauth: TokenValidator | None = None,
        max_reauth_ms: int = 0,
    ) -> None:
        unknown = [m for m in mechanisms if m not in SUPPORTED]
        if unknown:
            from ingest.errors import ConfigError

            raise ConfigError(
                "sasl_enabled_mechanisms", f"unsupported {unknown}; supported: {list(SUPPORTED)}"
            )
        if OAUTHBEARER in mechanisms and oauth is None:
            from ingest.errors import ConfigError

            raise ConfigError("sasl_oauthbearer_jwks_file", "OAUTHBEARER needs a JWKS file or URL")
        self.credentials = credentials
        self.mechanisms = tuple(mechanisms)
        self.oauth = oauth
        self.max_reauth_ms = max_reauth_ms
        self.reauthentications = 0  # successful re-authentications (KIP-368)

    def handshake(self, session: SecuritySession, mechanism: str) -> bool:
        """Select ``mechanism`` for the connection; False when it is not
        enabled. On an authenticated connection this begins a
        re-authentication (the caller checks the mechanism is unchanged)."""
        if mechanism not in self.mechanisms:
            return False
        session.mechanism = mechanism
        session._scram = None
        session.reauthenticating = session.authenticated
        return True

    async def authenticate(self, session: SecuritySession, auth_bytes: bytes) -> AuthResult:
        mechanism = session.mechanism
        if mechanism is None or (session.authenticated and not session.reauthenticating):
            session.fail()
            return AuthResult(error="SaslAuthenticate without a SaslHandshake", illegal_state=True)
        if mechanism == "PLAIN":
            result = await self._plain(session, auth_bytes)
        elif mechanism == OAUTHBEARER:
            result = await self._oauthbearer(session, auth_bytes)
        else:
            result = await self._scram_step(session, mechanism, auth_bytes)
        if result.error is not None:
            session.fail()
            log.info(
                "authentication failed with %s for %s: %s",
                mechanism,
                session.listener.name,
                result.error,
            )
        return result

    async def _plain(self, session: SecuritySession, auth_bytes: bytes) -> AuthResult:
        parts = auth_bytes.split(b"\0")
        if len(parts) != 3:
            return AuthResult(error="malformed PLAIN message")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            return AuthResult(error="PLAIN message is not UTF-8")
        if authzid and authzid != user:
            return AuthResult(error="authorization id must be empty or the user name")
        if await asyncio.to_thread(self._check_password, user, password):
            return self._succeed(session, f"User:{user}")
        return AuthResult(error=_INVALID_CREDENTIALS.format(mechanism="PLAIN"))

    def _check_password(self, user: str, password: str) -> bool:
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            cred = self.credentials.get(user, mechanism)
            if cred is not None:
                return verify_password(cred, password)
        return False

    async def _scram_step(
        self, session: SecuritySession, mechanism: str, auth_bytes: bytes
    ) -> AuthResult:
        invalid = AuthResult(error=_INVALID_CREDENTIALS.format(mechanism=mechanism))
        try:
            if session._scram is None:  # client-first-message
                server = ScramServer(mechanism)
                user = server.client_first(auth_bytes)
                cred = await asyncio.to_thread(self.credentials.get, user, mechanism)
                if cred is None:
                    return invalid
                session._scram = server
                return AuthResult(server.server_first(cred))
            server, session._scram = session._scram, None  # client-final-message
            final = server.client_final(auth_bytes)
        except ScramError as exc:
            log.debug("SCRAM exchange refused: %s", exc)
            return invalid
        return self._succeed(session, f"User:{server.username or ''}", auth_bytes=final)

    async def _oauthbearer(self, session: SecuritySession, auth_bytes: bytes) -> AuthResult:
        assert self.oauth is not None  # checked at construction
        try:
            initial = parse_initial_response(auth_bytes)
            token = await asyncio.to_thread(self.oauth.validate, initial.token)
        except OAuthError as exc:
            log.info("OAUTHBEARER token refused on %s: %s", session.listener.name, exc)
            return AuthResult(error=error_json(exc.status))
        if initial.authzid and f"User:{initial.authzid}" != token.principal:
            return AuthResult(error=error_json("invalid_token"))
        return self._succeed(session, token.principal, token.expires_at)

    def _succeed(
        self,
        session: SecuritySession,
        principal: str,
        token_expires_at: float | None = None,
        auth_bytes: bytes = b"",
    ) -> AuthResult:
        lifetime_ms = 0
        if self.max_reauth_ms > 0:
            lifetime_ms = self.max_reauth_ms
            if token_expires_at is not None:
                left = int((token_expires_at - time.time()) * 1000)
                if left <= 0:
                    return AuthResult(error=error_json("invalid_token"))
                lifetime_ms = min(lifetime_ms, left)
        if session.reauthenticating:
            if principal != session.principal:
                return AuthResult(
                    error=f"Cannot change principals during re-authentication "
                    f"from {session.principal}: {principal}"
                )
            session.reauthenticating = False
            self.reauthentications += 1
            log.info(
                "re-authenticated %s with %s on %s (session %d ms)",
                principal,
                session.mechanism,
                session.listener.name,
                lifetime_ms,
            )
        session.authenticated = True
        session.principal = principal
        session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
        return AuthResult(auth_bytes, session_lifetime_ms=lifetime_ms)


_INVALID_CREDENTIALS = (
    "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism {mechanism}"
)
