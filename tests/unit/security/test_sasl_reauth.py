"""OAUTHBEARER through the authenticator and KIP-368 session lifetimes,
without sockets."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from ingest.security import (
    Listener,
    MemoryCredentialStore,
    SecurityProtocol,
    SecuritySession,
    make_credential,
)
from ingest.security.oauth import MemoryJwks, OAuthSettings, TokenValidator
from ingest.security.sasl import AuthResult, SaslAuthenticator
from tests.unit.security.oauth_keys import AUDIENCE, ISSUER, initial_response, jwks, rsa_key

KEY = rsa_key()


def _auth(max_reauth_ms: int = 0) -> SaslAuthenticator:
    creds = MemoryCredentialStore()
    creds.put("alice", make_credential("s3cret", "SCRAM-SHA-256"))
    creds.put("bob", make_credential("b0b", "SCRAM-SHA-256"))
    validator = TokenValidator(
        MemoryJwks(jwks(KEY)), OAuthSettings(issuer=ISSUER, audience=(AUDIENCE,))
    )
    return SaslAuthenticator(
        creds, ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"], validator, max_reauth_ms
    )


def _session() -> SecuritySession:
    p = SecurityProtocol.SASL_PLAINTEXT
    return SecuritySession(Listener(p.value, p, "127.0.0.1", 0))


def _login(auth: SaslAuthenticator, session: SecuritySession, mech: str, data: bytes) -> AuthResult:
    assert auth.handshake(session, mech)
    return asyncio.run(auth.authenticate(session, data))


def test_oauthbearer_login_sets_the_principal_and_no_lifetime_when_reauth_is_off() -> None:
    auth, session = _auth(), _session()
    result = _login(auth, session, "OAUTHBEARER", initial_response(KEY.token("carol")))
    assert result.error is None and result.session_lifetime_ms == 0
    assert session.authenticated and session.principal == "User:carol"
    assert session.expires_at is None


@pytest.mark.parametrize("lifetime_s", [-120, None])
def test_a_refused_token_answers_kafkas_json_and_closes(lifetime_s: int | None) -> None:
    auth, session = _auth(), _session()
    token = KEY.token(lifetime_s=lifetime_s) if lifetime_s else rsa_key(KEY.kid).token()
    result = _login(auth, session, "OAUTHBEARER", initial_response(token))
    assert json.loads(result.error or "") == {"status": "invalid_token"}
    assert not session.authenticated and session.close_after_response


def test_an_authzid_other_than_the_token_subject_is_refused() -> None:
    auth, session = _auth(), _session()
    result = _login(auth, session, "OAUTHBEARER", initial_response(KEY.token("carol"), "admin"))
    assert result.error is not None and session.close_after_response


def test_the_session_lifetime_is_the_setting_or_the_token_remaining_life() -> None:
    auth = _auth(max_reauth_ms=60_000)
    s1 = _session()
    r1 = _login(auth, s1, "PLAIN", b"\0alice\0s3cret")
    assert r1.session_lifetime_ms == 60_000
    s2 = _session()
    r2 = _login(auth, s2, "OAUTHBEARER", initial_response(KEY.token(lifetime_s=20)))
    assert 15_000 < r2.session_lifetime_ms <= 20_000


def test_an_expired_session_admits_only_a_handshake_until_reauthenticated() -> None:
    auth, session = _auth(max_reauth_ms=60_000), _session()
    _login(auth, session, "PLAIN", b"\0alice\0s3cret")
    assert session.expires_at is not None
    later = session.expires_at + 1
    assert session.refusal(0, now=session.expires_at - 1) is None
    assert "expired" in (session.refusal(0, now=later) or "")
    assert session.refusal(17, now=later) is None  # SaslHandshake begins a re-authentication
    result = _login(auth, session, "PLAIN", b"\0alice\0s3cret")
    assert result.error is None and auth.reauthentications == 1
    assert session.expires_at > time.monotonic() + 50 and session.refusal(0) is None


def test_reauthentication_may_not_change_the_principal() -> None:
    auth, session = _auth(max_reauth_ms=60_000), _session()
    _login(auth, session, "PLAIN", b"\0alice\0s3cret")
    result = _login(auth, session, "PLAIN", b"\0bob\0b0b")
    assert "Cannot change principals" in (result.error or "")
    assert session.close_after_response and session.principal == "User:alice"
    assert auth.reauthentications == 0


def test_authenticate_again_without_a_new_handshake_is_illegal() -> None:
    auth, session = _auth(max_reauth_ms=60_000), _session()
    _login(auth, session, "PLAIN", b"\0alice\0s3cret")
    again = asyncio.run(auth.authenticate(session, b"\0alice\0s3cret"))
    assert again.illegal_state and session.close_after_response


def test_a_begun_but_unfinished_reauthentication_does_not_extend_an_expired_session() -> None:
    auth, session = _auth(max_reauth_ms=60_000), _session()
    _login(auth, session, "PLAIN", b"\0alice\0s3cret")
    assert session.expires_at is not None
    later = session.expires_at + 1
    assert auth.handshake(session, "PLAIN") and session.reauthenticating
    assert session.refusal(36, now=later) is None  # SaslAuthenticate may finish it
    assert session.refusal(0, now=later) is not None  # nothing else until it has
    assert session.refusal(0, now=session.expires_at - 1) is None  # still within the session
