"""Client quotas (Kafka's producer_byte_rate / consumer_byte_rate) and where they live.

An entity is a user, a client id, or both, each either named or the default
(``None``), as Kafka's ``/config/users/<user>/clients/<client-id>``. A
quota store keeps, per entity, its quota values.

Guarantees every store gives (one contract suite checks them):

- ``alter`` sets and removes keys of one entity; an entity left with no key
  is forgotten.
- ``entries`` returns every entity with its values.
- ``version`` changes whenever a value was set or removed (by any process
  sharing the store).

Calls may block (the metadata-store backed one does I/O).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ingest.metadata.api import MetadataStore

__all__ = [
    "CONSUMER_BYTE_RATE",
    "ENTITY_TYPES",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "InvalidQuota",
    "MemoryQuotaStore",
    "MetadataQuotaStore",
    "QuotaEntity",
    "QuotaStore",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
USER, CLIENT_ID = "user", "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
_UNSET = "\x00unset"  # marks an entity type that the entity does not have


class InvalidQuota(ValueError):
    """An entity or quota value Kafka would refuse (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A user and/or a client id; ``None`` is the default one; a type the
    entity does not have is left out (``has_user`` / ``has_client``)."""

    user: str | None = _UNSET
    client_id: str | None = _UNSET

    @property
    def has_user(self) -> bool:
        return self.user != _UNSET

    @property
    def has_client(self) -> bool:
        return self.client_id != _UNSET

    @staticmethod
    def of(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        """From (entity type, name or None) pairs; :class:`InvalidQuota` for
        unknown or repeated types or an empty entity."""
        found: dict[str, str | None] = {}
        for kind, name in parts:
            if kind not in ENTITY_TYPES:
                raise InvalidQuota(f"entity type {kind!r}: only {list(ENTITY_TYPES)}")
            if kind in found:
                raise InvalidQuota(f"entity type {kind!r} given twice")
            if name == "":
                raise InvalidQuota(f"an empty {kind} name (the default is null)")
            found[kind] = name
        if not found:
            raise InvalidQuota("an entity names a user, a client id or both")
        return QuotaEntity(found.get(USER, _UNSET), found.get(CLIENT_ID, _UNSET))

    def parts(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        if self.has_user:
            out.append((USER, self.user))
        if self.has_client:
            out.append((CLIENT_ID, self.client_id))
        return out

    def key(self) -> str:
        return json.dumps(self.parts())


def check_values(values: Mapping[str, float]) -> None:
    for key, value in values.items():
        if key not in QUOTA_KEYS:
            raise InvalidQuota(f"quota {key!r} is not supported; supported: {list(QUOTA_KEYS)}")
        if not value > 0:
            raise InvalidQuota(f"{key} must be positive, got {value}")


class QuotaStore(Protocol):
    def alter(self, entity: QuotaEntity, put: Mapping[str, float], remove: Iterable[str]) -> None:
        """Set ``put`` and remove ``remove`` keys of ``entity``."""

    def entries(self) -> dict[QuotaEntity, dict[str, float]]: ...

    def version(self) -> str: ...


class MemoryQuotaStore:
    """In-process quotas (tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[QuotaEntity, dict[str, float]] = {}
        self._version = 0

    def alter(self, entity: QuotaEntity, put: Mapping[str, float], remove: Iterable[str]) -> None:
        with self._lock:
            values = {**self._values.get(entity, {}), **put}
            for key in remove:
                values.pop(key, None)
            if values:
                self._values[entity] = values
            else:
                self._values.pop(entity, None)
            self._version += 1

    def entries(self) -> dict[QuotaEntity, dict[str, float]]:
        with self._lock:
            return {e: dict(v) for e, v in self._values.items()}

    def version(self) -> str:
        with self._lock:
            return str(self._version)


_PREFIX = "quota/"
_VERSION_KEY = "quota.version"


class MetadataQuotaStore:
    """Quotas in the metadata store's key/value table (SQLite or PostgreSQL):
    one key per entity, so every broker of a cluster sees the same ones."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def alter(self, entity: QuotaEntity, put: Mapping[str, float], remove: Iterable[str]) -> None:
        key = _PREFIX + entity.key()
        old = self._store.get_kv(key)
        values: dict[str, float] = {**(json.loads(old) if old else {}), **put}
        for name in remove:
            values.pop(name, None)
        if values:
            self._store.put_kv(key, json.dumps(values, sort_keys=True))
        else:
            self._store.delete_kv(key)
        self._store.put_kv(_VERSION_KEY, uuid.uuid4().hex)

    def entries(self) -> dict[QuotaEntity, dict[str, float]]:
        out: dict[QuotaEntity, dict[str, float]] = {}
        for key, value in self._store.list_kv(_PREFIX).items():
            parts = [
                (str(k), None if n is None else str(n)) for k, n in json.loads(key[len(_PREFIX) :])
            ]
            out[QuotaEntity.of(parts)] = {str(k): float(v) for k, v in json.loads(value).items()}
        return out

    def version(self) -> str:
        return self._store.get_kv(_VERSION_KEY) or ""
