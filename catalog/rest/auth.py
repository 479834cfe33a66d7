"""Bearer tokens for the REST catalog service: static ones and OAuth2-issued ones.

Issued tokens are stateless: ``tl1.<payload>.<mac>`` where the payload (base64url
JSON) names the client (``sub``) and the expiry (``exp``, Unix seconds) and the
mac is HMAC-SHA256 over ``tl1.<payload>`` with the service's secret. Why not a table of issued tokens: nothing has to be stored, evicted or
bounded (any number of tokens costs no memory), checking one is a hash and a
clock read, and every process configured with the same secret accepts the
tokens of the others (several brokers behind one address). The price is that a
single token cannot be revoked before it expires; removing its client does
revoke all of that client's tokens, and the lifetime is configurable.

Without a configured secret each process draws a random one, so a restart
invalidates the tokens it issued; clients get 401 and ask for a new token, as
the spec's ``UnauthorizedResponse`` allows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["DEFAULT_TOKEN_LIFETIME_S", "IssuedToken", "RestAuth"]

DEFAULT_TOKEN_LIFETIME_S = 3600
_VERSION = "tl1"
# An Authorization header longer than this is refused without decoding it.
_MAX_TOKEN_CHARS = 1024


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    expires_in: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RestAuth:
    """Bearer-token guard for the service; no tokens and no clients means open.

    ``tokens`` are accepted as they are, forever. ``oauth2_clients`` (id ->
    secret) may exchange their credentials for a token at ``POST
    /v1/oauth/tokens`` that is accepted for ``token_lifetime_s`` seconds.
    ``secret`` signs issued tokens (random per instance when not given);
    ``clock`` returns Unix seconds (tests move it).
    """

    def __init__(
        self,
        tokens: Iterable[str] = (),
        oauth2_clients: dict[str, str] | None = None,
        *,
        token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S,
        secret: str | bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if token_lifetime_s < 1:
            raise ValueError("token lifetime must be at least one second")
        self._tokens = frozenset(tokens)
        self._clients = dict(oauth2_clients or {})
        self._lifetime = int(token_lifetime_s)
        if secret is None:
            self._key = secrets.token_bytes(32)
        else:
            self._key = secret.encode() if isinstance(secret, str) else bytes(secret)
        self.clock = clock

    @property
    def enabled(self) -> bool:
        return bool(self._tokens or self._clients)

    def state_size(self) -> int:
        """How many tokens this guard holds in memory: the static ones only."""
        return len(self._tokens)

    def issue(self, client_id: str, client_secret: str) -> IssuedToken | None:
        """A token for a known client with the right secret, else ``None``."""
        expected = self._clients.get(client_id)
        if expected is None or not secrets.compare_digest(
            expected.encode(), client_secret.encode()
        ):
            return None
        return self._sign(client_id)

    def refresh(self, subject_token: str) -> IssuedToken | None:
        """A fresh token for the client of a still valid issued token, else ``None``."""
        client_id = self._verify(subject_token)
        return None if client_id is None else self._sign(client_id)

    def accepts(self, authorization: str | None) -> bool:
        return self.caller(authorization) is not None

    def caller(self, authorization: str | None) -> tuple[str | None] | None:
        """Who sent the header: ``None`` when refused, else a one-tuple holding the
        OAuth2 client id, or ``None`` inside for a static token or no authentication."""
        if not self.enabled:
            return (None,)
        if not authorization or not authorization[:7].lower() == "bearer ":
            return None
        token = authorization[7:].strip()
        if token in self._tokens:
            return (None,)
        client = self._verify(token)
        return None if client is None else (client,)

    def client_of_token(self, token: str) -> str | None:
        """The client id of a genuine, unexpired issued token (other services of
        the platform accept these tokens too: the schema registry's bearer auth)."""
        return self._verify(token)

    def _mac(self, signed: str) -> str:
        return _b64(hmac.new(self._key, signed.encode(), hashlib.sha256).digest())

    def _sign(self, client_id: str) -> IssuedToken:
        # rounded up: a token lives at least the expires_in it claims (rounding
        # down made it die up to a second early, before a client that refreshes
        # in the last tenth of the lifetime, as Iceberg's Java client does, got to it)
        expires = math.ceil(self.clock()) + self._lifetime
        # JWT claim names: clients that read a token's "exp" (Iceberg's Java
        # client does) learn when to refresh; the token is not a JWT otherwise.
        claims = {"sub": client_id, "exp": expires, "jti": secrets.token_urlsafe(8)}
        signed = f"{_VERSION}.{_b64(json.dumps(claims, separators=(',', ':')).encode())}"
        return IssuedToken(f"{signed}.{self._mac(signed)}", self._lifetime)

    def _verify(self, token: str) -> str | None:
        """The client id of a genuine, unexpired token of a still configured client."""
        if len(token) > _MAX_TOKEN_CHARS:
            return None
        signed, _, mac = token.rpartition(".")
        version, _, payload = signed.partition(".")
        if version != _VERSION or not payload:
            return None
        if not hmac.compare_digest(self._mac(signed).encode(), mac.encode()):
            return None
        try:
            claims = json.loads(_unb64(payload))
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return None
        if not isinstance(claims, dict):
            return None
        client_id, expires = claims.get("sub"), claims.get("exp")
        if not isinstance(client_id, str) or not isinstance(expires, int):
            return None
        if self.clock() >= expires or client_id not in self._clients:
            return None
        return client_id
