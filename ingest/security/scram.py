"""SCRAM credentials and the server side of a SCRAM exchange (RFC 5802, RFC 7677).

Only what the server needs is stored: the salt, the iteration count, the
StoredKey and the ServerKey. The password itself is never kept; it cannot be
recovered from the stored values, yet a PLAIN login can still be checked
against them (:func:`verify_password`).

The protocol logic does no I/O: :class:`ScramServer` is fed client messages
and returns the server's answers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

__all__ = [
    "MECHANISMS",
    "MIN_ITERATIONS",
    "ScramCredential",
    "ScramError",
    "ScramServer",
    "credential_from_salted_password",
    "make_credential",
    "salted_password",
    "scram_hmac",
    "verify_password",
]

# mechanism name -> hashlib name
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's floor (and RFC 7677's recommendation)
MAX_ITERATIONS = 16384  # Kafka's ceiling


class ScramError(Exception):
    """The client's messages are malformed or its proof is wrong."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and one mechanism."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def scram_hmac(mechanism: str, key: bytes, msg: bytes) -> bytes:
    """HMAC with the mechanism's hash (RFC 5802's HMAC(key, str))."""
    return _hmac(_hash_name(mechanism), key, msg)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword: Hi(password, salt, i) with the mechanism's hash
    (PBKDF2; costs ``iterations`` HMACs, so call it off the event loop)."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


def _keys(hash_name: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted, b"Server Key")
    return stored_key, server_key


def make_credential(
    password: str, mechanism: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A salted, iterated credential for ``password`` (a fresh random salt by default)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    if not password:
        raise ValueError("password must not be empty")
    hash_name = _hash_name(mechanism)
    salt = salt if salt is not None else os.urandom(32)
    stored_key, server_key = _keys(hash_name, password, salt, iterations)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def credential_from_salted_password(
    salted_password: bytes, salt: bytes, iterations: int, mechanism: str
) -> ScramCredential:
    """The stored credential for a SaltedPassword a client computed
    (AlterUserScramCredentials sends that, never the password)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    hash_name = _hash_name(mechanism)
    if not salt or len(salted_password) != hashlib.new(hash_name).digest_size:
        raise ValueError("salt and salted password must be given, of the mechanism's size")
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted_password, b"Server Key")
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def verify_password(credential: ScramCredential, password: str) -> bool:
    """True when ``password`` is the one ``credential`` was made from (PLAIN
    logins; costs one PBKDF2 run, so call it off the event loop)."""
    hash_name = _hash_name(credential.mechanism)
    stored_key, _ = _keys(hash_name, password, credential.salt, credential.iterations)
    return hmac.compare_digest(stored_key, credential.stored_key)


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part[:16]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange, server side: two client messages, two answers.

    ``client_first`` returns the user name the client claims; the caller looks
    up that user's credential and passes it to ``server_first``; then
    ``client_final`` checks the proof and returns the server-final message,
    or raises :class:`ScramError`.
    """

    def __init__(self, mechanism: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._server_nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.username: str | None = None

    def client_first(self, message: bytes) -> str:
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("client-first-message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[0] == "p":
            raise ScramError("unsupported or malformed GS2 header (channel binding is not offered)")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("client-first-message lacks n= or r=")
        if "m" in attrs:
            raise ScramError("SCRAM extensions (m=) are not supported")
        self.username = _unescape_name(attrs["n"])
        self._nonce = attrs["r"] + self._server_nonce
        return self.username

    def server_first(self, credential: ScramCredential) -> bytes:
        if credential.mechanism != self.mechanism:
            raise ScramError("credential is for another mechanism")
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def client_final(self, message: bytes) -> bytes:
        cred = self._credential
        if cred is None:
            raise ScramError("client-final-message before server-first-message")
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("client-final-message is not UTF-8") from None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message lacks a proof")
        attrs = _attributes(without_proof)
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attrs.get("c") != expected_binding:
            raise ScramError("channel binding does not match")
        # As Kafka's broker: the nonce must end with the one the server sent
        # (librdkafka 2.0.x, e.g. Debian's kcat, repeats the client nonce in
        # front of it); the proof below covers the message exactly as sent.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("nonce does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("proof is not base64") from None
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        signature = _hmac(self._hash, cred.stored_key, auth_message.encode())
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise ScramError("invalid credentials")
        server_signature = _hmac(self._hash, cred.server_key, auth_message.encode())
        return b"v=" + base64.b64encode(server_signature)
