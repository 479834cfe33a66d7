"""OAUTHBEARER without sockets: the RFC 7628 initial response, JWT checks,
and one contract suite over every JWKS source (memory, file, URL)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest

from ingest.security.oauth import (
    FileJwks,
    JwksSource,
    MemoryJwks,
    OAuthError,
    OAuthSettings,
    TokenValidator,
    UrlJwks,
    parse_initial_response,
)
from tests.unit.security.oauth_keys import (
    AUDIENCE,
    ISSUER,
    SigningKey,
    ec_key,
    initial_response,
    jwks,
    rsa_key,
)

RSA = rsa_key()
EC = ec_key()
SETTINGS = OAuthSettings(issuer=ISSUER, audience=(AUDIENCE,), clock_skew_s=5)


# --- initial response ------------------------------------------------------------


def test_the_initial_response_yields_token_authzid_and_extensions() -> None:
    got = parse_initial_response(b"n,a=alice,\x01auth=Bearer abc.def.ghi\x01ext=1\x01\x01")
    assert (got.token, got.authzid, dict(got.extensions)) == ("abc.def.ghi", "alice", {"ext": "1"})
    assert parse_initial_response(initial_response("t.o.k")).token == "t.o.k"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"y,,\x01auth=Bearer t\x01\x01",  # channel binding
        b"n,,\x01auth=Basic t\x01\x01",
        b"n,,\x01auth=Bearer t",  # not terminated
        b"n,,\x01\x01",
        b"n,x,\x01auth=Bearer t\x01\x01",
        b"\xff\xfe",
    ],
)
def test_malformed_initial_responses_are_refused(raw: bytes) -> None:
    with pytest.raises(OAuthError) as info:
        parse_initial_response(raw)
    assert info.value.status == "invalid_request"


# --- JWKS sources: one contract over every implementation ------------------------


class _Jwks(BaseHTTPRequestHandler):
    doc: dict[str, Any] = {}
    hits = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).hits += 1
        body = json.dumps(type(self).doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, type[_Jwks]]]:
    handler = type("H", (_Jwks,), {"doc": {}, "hits": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", handler
    finally:
        server.shutdown()
        server.server_close()


# make(initial jwks) -> (source, rotate(new jwks))
Maker = Callable[[dict[str, Any]], tuple[JwksSource, Callable[[dict[str, Any]], None]]]


@pytest.fixture(params=["memory", "file", "url"])
def make_source(
    request: pytest.FixtureRequest, tmp_path: Path, jwks_server: tuple[str, type[_Jwks]]
) -> Maker:
    if request.param == "memory":

        def memory(doc: dict[str, Any]) -> tuple[JwksSource, Callable[[dict[str, Any]], None]]:
            src = MemoryJwks(doc)
            return src, src.set

        return memory
    if request.param == "file":
        path = tmp_path / "jwks.json"

        def file(doc: dict[str, Any]) -> tuple[JwksSource, Callable[[dict[str, Any]], None]]:
            path.write_text(json.dumps(doc))

            def rotate(new: dict[str, Any]) -> None:
                path.write_text(json.dumps(new) + " " * 7)  # another size: a changed file

            return FileJwks(str(path)), rotate

        return file
    url, handler = jwks_server

    def web(doc: dict[str, Any]) -> tuple[JwksSource, Callable[[dict[str, Any]], None]]:
        handler.doc = doc

        def rotate(new: dict[str, Any]) -> None:
            handler.doc = new

        return UrlJwks(url, cooldown_s=0), rotate

    return web


def test_a_source_finds_keys_by_kid_and_the_only_key_without_one(make_source: Maker) -> None:
    source, _ = make_source(jwks(RSA))
    found = source.key(RSA.kid)
    assert found is not None and found.key_id == RSA.kid
    assert source.key(None) is not None  # one key: a token without kid may use it
    assert source.key("nope") is None
    two, _ = make_source(jwks(RSA, EC))
    assert two.key(None) is None  # ambiguous
    assert two.key(EC.kid) is not None


def test_a_rotated_key_is_found_once_the_set_changes(make_source: Maker) -> None:
    source, rotate = make_source(jwks(RSA))
    new = rsa_key("rsa-2")
    assert source.key(new.kid) is None
    rotate(jwks(RSA, new))
    found = source.key(new.kid)
    assert found is not None and found.key_id == "rsa-2"


def test_the_url_source_caches_the_set(jwks_server: tuple[str, type[_Jwks]]) -> None:
    url, handler = jwks_server
    handler.doc = jwks(RSA)
    source = UrlJwks(url)
    for _ in range(5):
        assert source.key(RSA.kid) is not None
    assert handler.hits == 1


# --- validation ------------------------------------------------------------------------


def _validator(*keys: SigningKey, settings: OAuthSettings = SETTINGS) -> TokenValidator:
    return TokenValidator(MemoryJwks(jwks(*keys)), settings)


@pytest.mark.parametrize("key", [RSA, EC], ids=["RS256", "ES256"])
def test_a_valid_token_gives_the_principal_and_expiry(key: SigningKey) -> None:
    token = key.token("alice", lifetime_s=120)
    got = _validator(key).validate(token)
    assert got.principal == "User:alice"
    assert got.expires_at == jwt.decode(token, options={"verify_signature": False})["exp"]


def test_the_principal_comes_from_the_configured_claim() -> None:
    settings = OAuthSettings(issuer=ISSUER, audience=(AUDIENCE,), principal_claim="client_id")
    got = _validator(RSA, settings=settings).validate(RSA.token("x", client_id="svc-orders"))
    assert got.principal == "User:svc-orders"
    with pytest.raises(OAuthError):
        _validator(RSA, settings=settings).validate(RSA.token("x"))  # no such claim


def _refused(token: str, validator: TokenValidator | None = None) -> str:
    with pytest.raises(OAuthError) as info:
        (validator or _validator(RSA, EC)).validate(token)
    assert info.value.status == "invalid_token"
    return str(info.value)


def test_expired_and_not_yet_valid_tokens_are_refused_beyond_the_skew() -> None:
    assert "expired" in _refused(RSA.token(lifetime_s=-60))
    _validator(RSA).validate(RSA.token(lifetime_s=-2))  # within the 5 s skew
    now = int(__import__("time").time())
    assert "not yet valid" in _refused(RSA.token(nbf=now + 60))
    _refused(RSA.token(iat=now + 60))
    _refused(RSA.token(exp=None))  # exp is required


def test_a_token_signed_by_another_key_is_refused() -> None:
    forged = SigningKey(RSA.kid, "RS256", rsa_key().private)  # same kid, other key
    assert "Signature" in _refused(forged.token())
    _refused(rsa_key("unknown").token())  # kid not in the set


def test_wrong_issuer_or_audience_is_refused() -> None:
    _refused(RSA.token(iss="https://evil.test"))
    _refused(RSA.token(aud="someone-else"))
    lax = _validator(RSA, settings=OAuthSettings())  # no issuer/audience expected
    assert lax.validate(RSA.token(iss="any", aud="any")).principal == "User:alice"


def test_symmetric_and_unsigned_tokens_are_refused() -> None:
    assert "algorithm" in _refused(jwt.encode({"sub": "a", "exp": 2**31}, "k" * 32, "HS256"))
    assert "algorithm" in _refused(jwt.encode({"sub": "a", "exp": 2**31}, "", "none"))
    _refused("not-a-jwt")


def test_required_scopes() -> None:
    settings = OAuthSettings(required_scopes=("kafka.produce",))
    validator = _validator(RSA, settings=settings)
    assert validator.validate(RSA.token(scope="openid kafka.produce")).principal == "User:alice"
    with pytest.raises(OAuthError) as info:
        validator.validate(RSA.token(scope="openid"))
    assert info.value.status == "insufficient_scope"
