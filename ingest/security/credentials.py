"""Where SCRAM credentials live: a small store interface and two implementations.

Guarantees every implementation gives (checked by one contract suite):

- ``put`` replaces the user's credential for that mechanism; a user may hold
  one credential per mechanism.
- ``get`` returns what the last ``put`` stored, or ``None``.
- ``delete`` returns whether something was removed; deleting a user without
  a mechanism removes every mechanism of the user.
- Only salted, iterated keys are stored (:class:`~ingest.security.scram.ScramCredential`),
  never a password.

Calls may block (the metadata-store backed one does I/O): async callers run
them in a worker thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from ingest.metadata.api import MetadataStore, ScramCredentialRecord
from ingest.security.scram import ScramCredential

__all__ = [
    "CredentialStore",
    "MemoryCredentialStore",
    "MetadataCredentialStore",
    "UserCredentialInfo",
]


@dataclass(frozen=True, slots=True)
class UserCredentialInfo:
    """What may be shown of a credential (no keys)."""

    user: str
    mechanism: str
    iterations: int


class CredentialStore(Protocol):
    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def put(self, user: str, credential: ScramCredential) -> None: ...

    def delete(self, user: str, mechanism: str | None = None) -> bool: ...

    def list(self, user: str | None = None) -> list[UserCredentialInfo]:
        """Every credential (of ``user`` when given), by user then mechanism."""


class MemoryCredentialStore:
    """In-process credentials (tests, a broker without a metadata store)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._creds: dict[tuple[str, str], ScramCredential] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._creds.get((user, mechanism))

    def put(self, user: str, credential: ScramCredential) -> None:
        with self._lock:
            self._creds[(user, credential.mechanism)] = credential

    def delete(self, user: str, mechanism: str | None = None) -> bool:
        with self._lock:
            keys = [k for k in self._creds if k[0] == user and mechanism in (None, k[1])]
            for k in keys:
                del self._creds[k]
            return bool(keys)

    def list(self, user: str | None = None) -> list[UserCredentialInfo]:
        with self._lock:
            return [
                UserCredentialInfo(u, m, c.iterations)
                for (u, m), c in sorted(self._creds.items())
                if user in (None, u)
            ]


class MetadataCredentialStore:
    """Credentials in the metadata store (SQLite or PostgreSQL), so every
    broker of a cluster and the ``tidelake users`` command see the same ones."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        rec = self._store.get_scram_credential(user, mechanism)
        if rec is None:
            return None
        return ScramCredential(
            rec.mechanism, rec.salt, rec.stored_key, rec.server_key, rec.iterations
        )

    def put(self, user: str, credential: ScramCredential) -> None:
        self._store.put_scram_credential(
            ScramCredentialRecord(
                user,
                credential.mechanism,
                credential.salt,
                credential.stored_key,
                credential.server_key,
                credential.iterations,
            )
        )

    def delete(self, user: str, mechanism: str | None = None) -> bool:
        return self._store.delete_scram_credentials(user, mechanism)

    def list(self, user: str | None = None) -> list[UserCredentialInfo]:
        return [
            UserCredentialInfo(r.user, r.mechanism, r.iterations)
            for r in self._store.list_scram_credentials(user)
        ]
