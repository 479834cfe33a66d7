"""SCRAM server side: RFC 7677's exchange, wrong proofs, stored values."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from ingest.security.scram import (
    ScramError,
    ScramServer,
    credential_from_salted_password,
    make_credential,
    verify_password,
)


def _client_final(
    mechanism: str, password: str, client_first_bare: str, server_first: str, gs2: str = "n,,"
) -> str:
    """What a SCRAM client sends second (RFC 5802 section 3), computed here independently."""
    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = hashlib.new(h, client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_rfc7677_example_exchange_gives_the_rfc_messages() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential("pencil", "SCRAM-SHA-256", 4096, salt)
    server = ScramServer("SCRAM-SHA-256", nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == "user"
    assert server.server_first(cred) == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.client_final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_right_password_authenticates_and_wrong_one_is_refused(mechanism: str) -> None:
    cred = make_credential("s3cret", mechanism)
    for password, ok in (("s3cret", True), ("S3cret", False)):
        server = ScramServer(mechanism)
        server.client_first(b"n,,n=alice,r=abc123")
        server_first = server.server_first(cred).decode()
        final = _client_final(mechanism, password, "n=alice,r=abc123", server_first)
        if ok:
            assert server.client_final(final.encode()).startswith(b"v=")
        else:
            with pytest.raises(ScramError):
                server.client_final(final.encode())


def test_a_replayed_nonce_from_another_exchange_is_refused() -> None:
    cred = make_credential("s3cret", "SCRAM-SHA-256")
    first = ScramServer("SCRAM-SHA-256")
    first.client_first(b"n,,n=alice,r=abc")
    old_final = _client_final(
        "SCRAM-SHA-256", "s3cret", "n=alice,r=abc", first.server_first(cred).decode()
    )
    second = ScramServer("SCRAM-SHA-256")
    second.client_first(b"n,,n=alice,r=abc")
    second.server_first(cred)
    with pytest.raises(ScramError, match="nonce"):
        second.client_final(old_final.encode())


def test_a_final_nonce_that_repeats_the_client_nonce_in_front_is_accepted_as_kafka_does() -> None:
    # librdkafka 2.0.x (Debian's kcat) sends r=<client nonce><client nonce + server nonce>
    cred = make_credential("s3cret", "SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256")
    server.client_first(b"n,,n=alice,r=abc")
    server_first = server.server_first(cred).decode()
    doubled = server_first.replace("r=", "r=abc", 1)
    final = _client_final("SCRAM-SHA-256", "s3cret", "n=alice,r=abc", doubled)
    # the proof is over what the client sent, so recompute the auth message as it did
    assert final.startswith("c=biws,r=abcabc")
    without_proof = final.rpartition(",p=")[0]
    h, salt = "sha256", cred.salt
    salted = hashlib.pbkdf2_hmac(h, b"s3cret", salt, cred.iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    auth = f"n=alice,r=abc,{server_first},{without_proof}".encode()
    sig = hmac.new(hashlib.new(h, client_key).digest(), auth, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    assert server.client_final(f"{without_proof},p={proof.decode()}".encode()).startswith(b"v=")
    other = ScramServer("SCRAM-SHA-256")
    other.client_first(b"n,,n=alice,r=abc")
    other.server_first(cred)
    with pytest.raises(ScramError, match="nonce"):  # must still end with the server's nonce
        other.client_final(b"c=biws,r=abcXYZ,p=" + proof)


@pytest.mark.parametrize(
    "message",
    [b"p=tls-unique,,n=alice,r=abc", b"n,,r=abc", b"n,,n=alice", b"garbage", b"\xff\xfe"],
)
def test_malformed_or_channel_bound_client_first_is_refused(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").client_first(message)


def test_escaped_user_names_are_unescaped() -> None:
    assert ScramServer("SCRAM-SHA-256").client_first(b"n,,n=a=2Cb=3Dc,r=x") == "a,b=c"


def test_stored_credential_holds_no_password_and_checks_plain_logins() -> None:
    cred = make_credential("s3cret", "SCRAM-SHA-512", 4096)
    assert b"s3cret" not in cred.salt + cred.stored_key + cred.server_key
    assert len(cred.salt) >= 16
    assert verify_password(cred, "s3cret")
    assert not verify_password(cred, "s3cret ")


@pytest.mark.parametrize("iterations", [1, 4095, 16385])
def test_iterations_outside_kafkas_bounds_are_refused(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        make_credential("pw", "SCRAM-SHA-256", iterations)


def test_a_salted_password_from_a_client_gives_the_same_credential_as_the_password() -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cret", salt, 8192)
    assert credential_from_salted_password(salted, salt, 8192, "SCRAM-SHA-512") == make_credential(
        "s3cret", "SCRAM-SHA-512", 8192, salt
    )
    with pytest.raises(ValueError):
        credential_from_salted_password(salted[:10], salt, 8192, "SCRAM-SHA-512")
    with pytest.raises(ValueError):
        credential_from_salted_password(salted, salt, 100, "SCRAM-SHA-512")
