"""SASL OAUTHBEARER (KIP-255, RFC 7628): the client's initial response and
the validation of the JWT it carries.

A token is accepted when its signature verifies against a key of the
configured JWKS (found by the token's ``kid``; a kid the cached set does not
hold makes the source reload once), it uses an asymmetric algorithm (RS*,
PS*, ES*), its ``exp`` / ``nbf`` / ``iat`` hold within the clock skew, its
issuer and audience are the expected ones (when set), and it carries the
required scopes (when set). The principal is ``User:<claim>`` of the
configured claim (``sub`` by default).

:class:`JwksSource` is the small interface over where keys come from:
:class:`MemoryJwks` (tests, embedding), :class:`FileJwks` (a JSON file,
re-read when it changes) and :class:`UrlJwks` (an HTTPS endpoint through
PyJWT's cached ``PyJWKClient``). Validation does blocking I/O only inside a
source, so callers run it in a worker thread.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jwt
from jwt import PyJWK, PyJWKClient, PyJWKSet

from ingest.errors import TidelakeError

__all__ = [
    "ALGORITHMS",
    "FileJwks",
    "InitialResponse",
    "JwksSource",
    "MemoryJwks",
    "OAuthError",
    "OAuthSettings",
    "TokenValidator",
    "UrlJwks",
    "ValidToken",
    "error_json",
    "parse_initial_response",
]

# asymmetric algorithms only: never "none" nor HMAC with a public key
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class OAuthError(TidelakeError):
    """A token or an OAUTHBEARER message the broker refuses; ``status`` is
    the RFC 7628 error status sent to the client."""

    def __init__(self, reason: str, status: str = "invalid_token") -> None:
        super().__init__(reason)
        self.status = status


def error_json(status: str = "invalid_token", scope: str | None = None) -> str:
    """The server's error message of RFC 7628 section 3.2.2, as Kafka sends it."""
    body: dict[str, str] = {"status": status}
    if scope:
        body["scope"] = scope
    return json.dumps(body, separators=(",", ":"))


# --- RFC 7628 client initial response ------------------------------------------


@dataclass(frozen=True, slots=True)
class InitialResponse:
    token: str
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_initial_response(data: bytes) -> InitialResponse:
    """``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OAuthError("OAUTHBEARER message is not UTF-8", "invalid_request") from exc
    header, sep, rest = text.partition("\x01")
    gs2 = header.split(",")
    if not sep or len(gs2) != 3 or gs2[0] != "n" or gs2[2] != "":
        raise OAuthError("malformed OAUTHBEARER GS2 header", "invalid_request")
    authzid = gs2[1][2:] if gs2[1].startswith("a=") else ""
    if gs2[1] and not gs2[1].startswith("a="):
        raise OAuthError("malformed OAUTHBEARER authorization id", "invalid_request")
    if not rest.endswith("\x01"):
        raise OAuthError("OAUTHBEARER message not terminated", "invalid_request")
    pairs: dict[str, str] = {}
    for item in rest[:-1].split("\x01"):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise OAuthError(f"malformed OAUTHBEARER key/value {item!r}", "invalid_request")
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise OAuthError("OAUTHBEARER message without a Bearer token", "invalid_request")
    return InitialResponse(token.strip(), authzid, pairs)


# --- where keys come from ----------------------------------------------------------


class JwksSource(Protocol):
    def key(self, kid: str | None) -> PyJWK | None:
        """The signing key with this ``kid`` (the only key when ``kid`` is
        None and the set holds one), or None."""
        ...


def _pick(keys: Sequence[PyJWK], kid: str | None) -> PyJWK | None:
    if kid is None:
        return keys[0] if len(keys) == 1 else None
    for k in keys:
        if k.key_id == kid:
            return k
    return None


def _usable(jwks: Mapping[str, Any]) -> list[PyJWK]:
    raw = [k for k in jwks.get("keys", []) if k.get("use", "sig") == "sig"]
    return list(PyJWKSet.from_dict({"keys": raw}).keys) if raw else []


class MemoryJwks:
    """A JWKS held in memory (``set`` replaces it, as a key rotation does)."""

    def __init__(self, jwks: Mapping[str, Any]) -> None:
        self._keys = _usable(jwks)

    def set(self, jwks: Mapping[str, Any]) -> None:
        self._keys = _usable(jwks)

    def key(self, kid: str | None) -> PyJWK | None:
        return _pick(self._keys, kid)


class FileJwks:
    """A JWKS JSON file; re-read when a kid is unknown and the file changed
    (a rotated key is picked up without a restart)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self._keys: list[PyJWK] = []
        self._load()

    def _load(self) -> None:
        st = os.stat(self.path)
        stamp = (st.st_mtime, st.st_size)
        if stamp == self._stamp:
            return
        with open(self.path, encoding="utf-8") as f:
            self._keys = _usable(json.load(f))
        self._stamp = stamp

    def key(self, kid: str | None) -> PyJWK | None:
        found = _pick(self._keys, kid)
        if found is None:
            with self._lock:
                try:
                    self._load()
                except (OSError, ValueError, jwt.PyJWTError):
                    return None
                found = _pick(self._keys, kid)
        return found


class UrlJwks:
    """A JWKS endpoint, cached for ``lifespan_s`` and fetched again when a kid
    is unknown, at most once per ``cooldown_s`` (so tokens with made-up kids
    cannot make the broker flood the identity provider); PyJWT's
    ``PyJWKClient``."""

    def __init__(
        self,
        url: str,
        lifespan_s: float = 300.0,
        timeout_s: float = 10.0,
        cooldown_s: float = 10.0,
    ) -> None:
        self._client = PyJWKClient(
            url,
            cache_keys=True,
            lifespan=lifespan_s,
            timeout=timeout_s,
            cooldown_duration=cooldown_s,
        )

    def key(self, kid: str | None) -> PyJWK | None:
        try:
            if kid is None:
                keys = self._client.get_signing_keys()
                return keys[0] if len(keys) == 1 else None
            return self._client.get_signing_key(kid)
        except jwt.PyJWKClientError:
            return None


# --- validation -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    issuer: str | None = None
    audience: Sequence[str] = ()
    principal_claim: str = "sub"
    clock_skew_s: float = 30.0
    required_scopes: Sequence[str] = ()
    scope_claim: str = "scope"


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str  # "User:<claim>"
    expires_at: float  # the token's exp, in seconds since the epoch
    claims: Mapping[str, Any]


class TokenValidator:
    """Checks JWTs against a :class:`JwksSource` and :class:`OAuthSettings`."""

    def __init__(self, source: JwksSource, settings: OAuthSettings) -> None:
        self.source = source
        self.settings = settings

    def validate(self, token: str) -> ValidToken:
        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise OAuthError(f"not a JWT: {exc}") from exc
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise OAuthError(f"algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        key = self.source.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise OAuthError(f"no key {kid!r} in the JWKS")
        options: dict[str, Any] = {"require": ["exp", s.principal_claim]}
        if s.issuer is None:
            options["verify_iss"] = False
        if not s.audience:
            options["verify_aud"] = False
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=list(s.audience) or None,
                issuer=s.issuer,
                leeway=s.clock_skew_s,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.PyJWTError as exc:
            raise OAuthError(f"token refused: {exc}") from exc
        subject = claims.get(s.principal_claim)
        if not isinstance(subject, str) or not subject:
            raise OAuthError(f"claim {s.principal_claim!r} is not a non-empty string")
        if s.required_scopes:
            granted = _scopes(claims.get(s.scope_claim))
            missing = [x for x in s.required_scopes if x not in granted]
            if missing:
                raise OAuthError(f"missing scopes {missing}", "insufficient_scope")
        return ValidToken(f"User:{subject}", float(claims["exp"]), claims)


def _scopes(value: object) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {str(v) for v in value}
    return set()
