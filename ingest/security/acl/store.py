"""Where ACL bindings live: a small store interface and two implementations.

Guarantees every implementation gives (checked by one contract suite):

- ``add`` stores a binding once; adding it again changes nothing and returns False.
- ``remove`` deletes every binding the filter matches and returns them.
- ``list`` returns the stored bindings the filter matches, sorted.
- ``version`` changes whenever a binding was added or removed (by any
  process sharing the store), so a cache reloads only when it must.

Calls may block (the metadata-store backed one does I/O): async callers run
them in a worker thread.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ingest.metadata.api import AclRecord, MetadataStore
from ingest.security.acl.model import AclBinding, AclBindingFilter, binding_from_codes

__all__ = ["AclStore", "MemoryAclStore", "MetadataAclStore"]

_EVERYTHING = AclBindingFilter()


class AclStore(Protocol):
    def add(self, binding: AclBinding) -> bool: ...

    def remove(self, selector: AclBindingFilter) -> list[AclBinding]: ...

    def list(self, selector: AclBindingFilter = _EVERYTHING) -> list[AclBinding]: ...

    def version(self) -> int: ...


class MemoryAclStore:
    """In-process bindings (tests, a broker without a metadata store)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bindings: set[AclBinding] = set()
        self._version = 0

    def add(self, binding: AclBinding) -> bool:
        with self._lock:
            if binding in self._bindings:
                return False
            self._bindings.add(binding)
            self._version += 1
            return True

    def remove(self, selector: AclBindingFilter) -> list[AclBinding]:
        with self._lock:
            gone = sorted(b for b in self._bindings if selector.matches(b))
            self._bindings.difference_update(gone)
            if gone:
                self._version += 1
            return gone

    def list(self, selector: AclBindingFilter = _EVERYTHING) -> list[AclBinding]:
        with self._lock:
            return sorted(b for b in self._bindings if selector.matches(b))

    def version(self) -> int:
        with self._lock:
            return self._version


def _record(b: AclBinding) -> AclRecord:
    return AclRecord(
        int(b.resource_type),
        b.resource_name,
        int(b.pattern_type),
        b.principal,
        b.host,
        int(b.operation),
        int(b.permission),
    )


def _binding(r: AclRecord) -> AclBinding:
    return binding_from_codes(
        r.resource_type,
        r.resource_name,
        r.pattern_type,
        r.principal,
        r.host,
        r.operation,
        r.permission_type,
    )


class MetadataAclStore:
    """Bindings in the metadata store (SQLite or PostgreSQL), so every broker
    of a cluster and the ``tidelake acls`` command see the same ones."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def add(self, binding: AclBinding) -> bool:
        return self._store.put_acl(_record(binding))

    def remove(self, selector: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.list(selector) if self._store.delete_acl(_record(b))]

    def list(self, selector: AclBindingFilter = _EVERYTHING) -> list[AclBinding]:
        return sorted(b for b in map(_binding, self._store.list_acls()) if selector.matches(b))

    def version(self) -> int:
        return self._store.acl_version()
