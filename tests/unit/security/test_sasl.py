"""The SASL exchange over a credential store, without sockets."""

from __future__ import annotations

import asyncio

import pytest

from ingest.errors import ConfigError
from ingest.security import (
    Listener,
    MemoryCredentialStore,
    SaslAuthenticator,
    SecurityProtocol,
    SecuritySession,
    make_credential,
)
from tests.unit.security.test_scram import _client_final


def _session(protocol: SecurityProtocol = SecurityProtocol.SASL_SSL) -> SecuritySession:
    return SecuritySession(Listener(protocol.value, protocol, "127.0.0.1", 0))


@pytest.fixture
def authenticator() -> SaslAuthenticator:
    creds = MemoryCredentialStore()
    creds.put("alice", make_credential("s3cret", "SCRAM-SHA-256"))
    creds.put("alice", make_credential("s3cret", "SCRAM-SHA-512"))
    return SaslAuthenticator(creds, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])


def test_a_sasl_connection_admits_only_the_sasl_apis_and_api_versions_until_authenticated(
    authenticator: SaslAuthenticator,
) -> None:
    session = _session()
    assert [k for k in range(70) if session.admits(k)] == [17, 18, 36]
    assert authenticator.handshake(session, "PLAIN")
    result = asyncio.run(authenticator.authenticate(session, b"\0alice\0s3cret"))
    assert result.error is None
    assert session.authenticated and session.principal == "User:alice"
    assert all(session.admits(k) for k in range(70))


def test_plaintext_and_ssl_connections_need_no_sasl() -> None:
    for protocol in (SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL):
        session = _session(protocol)
        assert session.authenticated and session.admits(0)
        assert session.principal == "User:ANONYMOUS"


@pytest.mark.parametrize(
    "auth_bytes", [b"\0alice\0wrong", b"\0nobody\0s3cret", b"bob\0alice\0s3cret", b"alice:s3cret"]
)
def test_a_failed_plain_login_marks_the_connection_to_close(
    authenticator: SaslAuthenticator, auth_bytes: bytes
) -> None:
    session = _session()
    authenticator.handshake(session, "PLAIN")
    result = asyncio.run(authenticator.authenticate(session, auth_bytes))
    assert result.error is not None and not result.illegal_state
    assert not session.authenticated and session.close_after_response


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("password", ["s3cret", "wrong"])
def test_scram_exchange(authenticator: SaslAuthenticator, mechanism: str, password: str) -> None:
    session = _session()
    assert authenticator.handshake(session, mechanism)

    async def run() -> tuple[str | None, bytes]:
        first = await authenticator.authenticate(session, b"n,,n=alice,r=nonce1")
        assert first.error is None and not session.authenticated
        final = _client_final(mechanism, password, "n=alice,r=nonce1", first.auth_bytes.decode())
        second = await authenticator.authenticate(session, final.encode())
        return second.error, second.auth_bytes

    error, server_final = asyncio.run(run())
    if password == "s3cret":
        assert error is None and server_final.startswith(b"v=")
        assert session.authenticated and session.principal == "User:alice"
    else:
        assert error is not None and "invalid credentials" in error
        assert not session.authenticated and session.close_after_response


def test_an_unknown_scram_user_fails_at_the_first_message(
    authenticator: SaslAuthenticator,
) -> None:
    session = _session()
    authenticator.handshake(session, "SCRAM-SHA-256")
    result = asyncio.run(authenticator.authenticate(session, b"n,,n=mallory,r=x"))
    assert result.error is not None and session.close_after_response


def test_unsupported_mechanism_is_refused_and_authenticate_without_handshake_is_illegal(
    authenticator: SaslAuthenticator,
) -> None:
    session = _session()
    assert not authenticator.handshake(session, "GSSAPI")
    result = asyncio.run(authenticator.authenticate(session, b"\0alice\0s3cret"))
    assert result.illegal_state and session.close_after_response


def test_enabling_an_unknown_mechanism_fails_at_start_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        SaslAuthenticator(MemoryCredentialStore(), ["SCRAM-SHA-256", "GSSAPI"])
    assert info.value.key == "sasl_enabled_mechanisms"
