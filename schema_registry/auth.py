"""Authentication and per-subject permissions for the registry's HTTP API.

Who: HTTP basic auth (Confluent clients' ``basic.auth.user.info``) checked
against the SCRAM credentials Kafka's SASL users have (``tidelake users``):
the password is salted and iterated with the stored salt and iteration count
and the derived StoredKey compared, so no password is ever stored. Bearer
tokens (``bearer.auth.token``) are static tokens configured per user, or
tokens the platform issued (the REST catalog's OAuth2 client-credentials
tokens, when the process wires its verifier in; the user is the client id).

What: grants per user, each ``role`` or ``role:subject`` or
``role:subject-prefix*`` with role ``read`` < ``write`` < ``admin`` (a higher
role includes the lower ones). No grants configured at all means every
authenticated user may do everything (authentication only). A schema read
by id (``/schemas/ids/{id}`` and its ``/schema``, ``/subjects``,
``/versions``) or by GUID needs read on at least one subject that holds it,
as Confluent's RBAC has it; lists show only the subjects the user may read.

The rules (:func:`required_access`, :class:`Grants`) do no I/O; the ASGI
middleware runs the credential check in a worker thread (PBKDF2 and the
store lookup block) and caches a successful check for a short while.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ingest.errors import ConfigError
from ingest.security.scram import MECHANISMS, ScramCredential, verify_password
from ingest.security.tls import server_context

__all__ = [
    "AUTH_MODES",
    "Access",
    "CredentialLookup",
    "Grants",
    "RegistryAuth",
    "RegistryAuthMiddleware",
    "Role",
    "SchemaHolders",
    "check_tls_files",
    "parse_auth_modes",
    "required_access",
    "schema_id_of",
]

AUTH_MODES = ("none", "basic", "bearer")
_CACHE_SECONDS = 30.0
_CACHE_MAX = 4096
_MAX_HEADER = 4096


class Role(IntEnum):
    READ = 1
    WRITE = 2
    ADMIN = 3


class CredentialLookup(Protocol):
    """The read side of :class:`ingest.security.credentials.CredentialStore`."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...


SchemaHolders = Callable[[int | str, str | None], Sequence[str]]
"""The subjects (qualified, soft-deleted versions included) that hold a schema:
an id in the context of the request's ``subject`` parameter, or a GUID (a str)
in any context; empty when none does. It blocks (a store read): the
middleware calls it in a worker thread."""


def parse_auth_modes(value: str) -> frozenset[str]:
    """``"none"``, ``"basic"``, ``"bearer"`` or ``"basic,bearer"`` -> the enabled modes."""
    modes = {m.strip().lower() for m in value.split(",") if m.strip()}
    unknown = modes - set(AUTH_MODES)
    if unknown or not modes:
        raise ValueError(f"auth must be none, basic, bearer or basic,bearer; got {value!r}")
    if "none" in modes and len(modes) > 1:
        raise ValueError("auth 'none' cannot be combined with another mode")
    return frozenset(modes - {"none"})


def check_tls_files(certfile: str | None, keyfile: str | None) -> None:
    """Raise ValueError unless the certificate and key (if any) load as a TLS
    server's (the Kafka listener's context building, ingest/security/tls.py)."""
    if keyfile and not certfile:
        raise ValueError("ssl_keyfile is set but ssl_certfile is not")
    if certfile:
        try:
            server_context(certfile, keyfile, None)
        except ConfigError as exc:
            # "invalid configuration 'ssl_certfile': cannot load ..." -> "cannot load ..."
            raise ValueError(str(exc).split(": ", 1)[-1]) from None


@dataclass(frozen=True, slots=True)
class Access:
    """What a request needs: ``role`` on ``subject`` (None: on no subject in
    particular; ``role`` ADMIN then means admin over every subject)."""

    role: Role
    subject: str | None
    operation: str


_SCHEMA_ID_PATH = re.compile(r"^/schemas/ids/([0-9]{1,10})(?:/schema|/subjects|/versions)?$")
_SCHEMA_GUID_PATH = re.compile(r"^/schemas/guids/([^/]{1,64})$")


def schema_id_of(method: str, path: str) -> int | str | None:
    """The schema a read by id names (``GET /schemas/ids/{id}[/schema|/subjects|
    /versions]``: the int id; ``GET /schemas/guids/{guid}``: the GUID), else None."""
    if method.upper() not in ("GET", "HEAD"):
        return None
    match = _SCHEMA_ID_PATH.match(path)
    if match:
        return int(match.group(1))
    match = _SCHEMA_GUID_PATH.match(path)
    return match.group(1) if match else None


def _subject_of(rest: str) -> str:
    subject, _, _ = rest.partition("/versions")
    return subject


def required_access(method: str, path: str) -> Access:
    """The access a registry request needs, from its method and (decoded) path."""
    method = method.upper()
    reading = method in ("GET", "HEAD", "OPTIONS")
    if path.startswith("/subjects/"):
        subject = _subject_of(path[len("/subjects/") :])
        if method == "DELETE":
            return Access(Role.ADMIN, subject, "Delete")
        if method == "POST" and "/versions" not in path[len("/subjects/") :]:
            return Access(Role.READ, subject, "Read")  # lookup of a schema under a subject
        if reading:
            return Access(Role.READ, subject, "Read")
        return Access(Role.WRITE, subject, "Write")
    if path.startswith("/compatibility/subjects/"):
        return Access(Role.READ, _subject_of(path[len("/compatibility/subjects/") :]), "Read")
    for head in ("/config/", "/mode/"):
        if path.startswith(head) and len(path) > len(head):
            subject = path[len(head) :]
            if reading:
                return Access(Role.READ, subject, "DescribeConfigs")
            return Access(Role.ADMIN, subject, "AlterConfigs")
    if path in ("/config", "/mode") and not reading:
        return Access(Role.ADMIN, None, "AlterConfigs")
    return Access(Role.READ, None, "Read")


@dataclass(frozen=True, slots=True)
class _Grant:
    role: Role
    subject: str  # "" = every subject
    prefix: bool

    def covers(self, subject: str) -> bool:
        if not self.subject:
            return True
        return subject.startswith(self.subject) if self.prefix else subject == self.subject


def _parse_grant(text: str) -> _Grant:
    role_name, sep, pattern = text.strip().partition(":")
    try:
        role = Role[role_name.strip().upper()]
    except KeyError:
        raise ValueError(f"grant {text!r}: role must be read, write or admin") from None
    pattern = pattern.strip()
    if sep and not pattern:
        raise ValueError(f"grant {text!r}: empty subject after ':'")
    prefix = pattern.endswith("*")
    pattern = pattern.rstrip("*") if prefix else pattern
    if pattern == "":
        prefix = False
    return _Grant(role, pattern, prefix)


class Grants:
    """Per-user grants; an empty table lets every authenticated user do everything."""

    def __init__(self, table: Mapping[str, Iterable[str]]) -> None:
        self._table = {
            user: tuple(_parse_grant(g) for g in grants) for user, grants in table.items()
        }

    @property
    def enforced(self) -> bool:
        return bool(self._table)

    def allows(self, user: str, access: Access) -> bool:
        if not self._table:
            return True
        grants = self._table.get(user, ())
        if access.subject is None:
            if access.role is Role.ADMIN:
                return any(g.role is Role.ADMIN and not g.subject for g in grants)
            return bool(grants)  # any grant lets a user read what names no subject
        return any(g.role >= access.role and g.covers(access.subject) for g in grants)

    def reads_every_subject(self, user: str) -> bool:
        """Whether ``user`` may read whatever subject: no grants enforced, or an
        unscoped grant."""
        if not self._table:
            return True
        return any(not g.subject for g in self._table.get(user, ()))

    def reads_any(self, user: str, subjects: Iterable[str]) -> bool:
        """Whether ``user`` may read at least one of ``subjects``."""
        return any(self.allows(user, Access(Role.READ, s, "Read")) for s in subjects)


class RegistryAuth:
    """Who is calling: basic credentials against the SCRAM store, or a static
    bearer token. ``clock`` (monotonic seconds) drives the check cache."""

    def __init__(
        self,
        modes: frozenset[str],
        credentials: CredentialLookup | None,
        bearer_tokens: Mapping[str, str] | None = None,
        *,
        token_verifier: Callable[[str], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if "basic" in modes and credentials is None:
            raise ValueError("basic auth needs the user credential store")
        self.modes = modes
        self._credentials = credentials
        self._tokens = [(t.encode(), u) for t, u in (bearer_tokens or {}).items()]
        self._token_verifier = token_verifier  # tokens the platform issued -> user
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._verified: dict[bytes, float] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.modes)

    async def authenticate(self, authorization: str | None) -> str | None:
        """The user name, or None when the header proves nobody."""
        if not authorization or len(authorization) > _MAX_HEADER:
            return None
        scheme, _, value = authorization.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "basic" and "basic" in self.modes:
            return await self._basic(value.strip())
        if scheme == "bearer" and "bearer" in self.modes:
            return self._bearer(value.strip())
        return None

    def _bearer(self, token: str) -> str | None:
        raw = token.encode()
        found: str | None = None
        for known, user in self._tokens:  # compare every one: no early exit to time
            if hmac.compare_digest(known, raw):
                found = user
        if found is None and self._token_verifier is not None:
            found = self._token_verifier(token)
        return found

    async def _basic(self, value: str) -> str | None:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep or not user or not password:
            return None
        cache_key = hmac.new(self._key, decoded.encode(), hashlib.sha256).digest()
        now = self._clock()
        until = self._verified.get(cache_key)
        if until is not None and until > now:
            return user
        if not await asyncio.to_thread(self._check_password, user, password):
            self._verified.pop(cache_key, None)
            return None
        if len(self._verified) >= _CACHE_MAX:
            self._verified.clear()
        self._verified[cache_key] = now + _CACHE_SECONDS
        return user

    def _check_password(self, user: str, password: str) -> bool:
        assert self._credentials is not None
        for mechanism in MECHANISMS:
            credential = self._credentials.get(user, mechanism)
            if credential is not None:
                return verify_password(credential, password)
        return False


def _error(
    status: int, code: int, message: str, headers: list[tuple[bytes, bytes]]
) -> dict[str, object]:
    body = json.dumps({"error_code": code, "message": message}).encode()
    return {
        "status": status,
        "body": body,
        "headers": [
            (b"content-type", b"application/vnd.schemaregistry.v1+json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
    }


# answers that list subjects: only those the user may read are shown, as
# Confluent's RBAC does
_LISTS = re.compile(r"^/(subjects|schemas|schemas/ids/[0-9]+/(subjects|versions))$")


def _only_readable(send: Send, grants: Grants, user: str) -> Send:
    """A ``send`` that drops the entries of a JSON list (subject names or objects
    with a ``subject``) that ``user`` may not read."""
    start: Message | None = None
    chunks: list[bytes] = []

    def readable(entry: object) -> bool:
        subject = entry.get("subject") if isinstance(entry, dict) else entry
        if not isinstance(subject, str):
            return True
        return grants.allows(user, Access(Role.READ, subject, "Read"))

    async def filtered(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        if start["status"] == 200:
            try:
                listed = json.loads(body)
            except ValueError:
                listed = None
            if isinstance(listed, list):
                body = json.dumps(
                    [e for e in listed if readable(e)], separators=(",", ":")
                ).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return filtered


class RegistryAuthMiddleware:
    """Every HTTP request is authenticated and authorized before it is routed:
    401 ``{"error_code": 401}`` without valid credentials, 403
    ``{"error_code": 40301}`` without the role (Confluent's RBAC answers)."""

    def __init__(
        self,
        app: ASGIApp,
        auth: RegistryAuth,
        grants: Grants,
        holders: SchemaHolders | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.grants = grants
        # None: a read by id needs only some grant (no store to ask)
        self.holders = holders

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.auth.enabled:
            await self.app(scope, receive, send)
            return
        header: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
        user = await self.auth.authenticate(header)
        if user is None:
            challenge = [(b"www-authenticate", b'Basic realm="tidelake-registry"')]
            if "basic" not in self.auth.modes:
                challenge = [(b"www-authenticate", b'Bearer realm="tidelake-registry"')]
            await self._answer(send, _error(401, 401, "Unauthorized", challenge))
            return
        access = required_access(scope["method"], scope["path"])
        if not self.grants.allows(user, access):
            target = f"Subject: {access.subject}" if access.subject is not None else "registry"
            message = f"User {user} is denied operation {access.operation} on {target}"
            await self._answer(send, _error(403, 40301, message, []))
            return
        schema_id = schema_id_of(scope["method"], scope["path"])
        if schema_id is not None and not await self._may_read_schema(user, schema_id, scope):
            message = f"User {user} is denied operation Read on Schema: {schema_id}"
            await self._answer(send, _error(403, 40301, message, []))
            return
        scope.setdefault("state", {})["principal"] = user
        if self.grants.enforced and scope["method"] == "GET" and _LISTS.match(scope["path"]):
            await self.app(scope, receive, _only_readable(send, self.grants, user))
            return
        await self.app(scope, receive, send)

    async def _may_read_schema(self, user: str, schema_id: int | str, scope: Scope) -> bool:
        """Read on a subject that holds the id; an id no subject holds is let
        through (the registry answers 40403 as it would to anyone)."""
        if self.holders is None or self.grants.reads_every_subject(user):
            return True
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        context_subject = query.get("subject", [None])[0]
        holders = await asyncio.to_thread(self.holders, schema_id, context_subject)
        return not holders or self.grants.reads_any(user, holders)

    @staticmethod
    async def _answer(send: Send, response: dict[str, object]) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": response["status"],
                "headers": response["headers"],
            }
        )
        await send({"type": "http.response.body", "body": response["body"]})
