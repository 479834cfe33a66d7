"""In-memory SchemaStore (``memory://``): tests and throwaway registries."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from schema_registry.store.base import (
    DEFAULT_CONTEXT,
    SchemaStore,
    StoredSchema,
    StoreTransaction,
    SubjectVersion,
    context_of,
)

__all__ = ["MemorySchemaStore"]


@dataclass
class _State:
    schemas: dict[tuple[str, int], StoredSchema] = field(default_factory=dict)
    by_fingerprint: dict[tuple[str, str], int] = field(default_factory=dict)
    versions: dict[tuple[str, int], SubjectVersion] = field(default_factory=dict)
    config: dict[str, dict[str, object]] = field(default_factory=dict)
    mode: dict[str, str] = field(default_factory=dict)
    next_id: dict[str, int] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(
            dict(self.schemas),
            dict(self.by_fingerprint),
            dict(self.versions),
            copy.deepcopy(self.config),
            dict(self.mode),
            dict(self.next_id),
        )


class _MemoryTransaction(StoreTransaction):
    def __init__(self, state: _State) -> None:
        self.s = state

    def schema_by_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        return self.s.schemas.get((context, schema_id))

    def schema_id_by_fingerprint(
        self, fingerprint: str, context: str = DEFAULT_CONTEXT
    ) -> int | None:
        return self.s.by_fingerprint.get((context, fingerprint))

    def add_schema(self, schema: StoredSchema) -> None:
        self.s.schemas[(schema.context, schema.id)] = schema
        key = (schema.context, schema.fingerprint)
        self.s.by_fingerprint[key] = min(schema.id, self.s.by_fingerprint.get(key, schema.id))
        self.note_imported_id(schema.id, schema.context)

    def schemas_by_fingerprint_prefix(self, prefix: str) -> list[StoredSchema]:
        return sorted(
            (s for s in self.s.schemas.values() if s.fingerprint.startswith(prefix)),
            key=lambda s: (s.context, s.id),
        )

    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        value = self.s.next_id.get(context, 1)
        self.s.next_id[context] = value + 1
        return value

    def note_imported_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        self.s.next_id[context] = max(self.s.next_id.get(context, 1), schema_id + 1)

    def subjects(self) -> list[str]:
        return sorted({subject for subject, _ in self.s.versions})

    def versions(self, subject: str) -> list[SubjectVersion]:
        return sorted(
            (v for (s, _), v in self.s.versions.items() if s == subject), key=lambda v: v.version
        )

    def versions_of_schema(
        self, schema_id: int, context: str = DEFAULT_CONTEXT
    ) -> list[SubjectVersion]:
        return sorted(
            (
                v
                for v in self.s.versions.values()
                if v.schema_id == schema_id and context_of(v.subject) == context
            ),
            key=lambda v: (v.subject, v.version),
        )

    def all_versions(self) -> list[SubjectVersion]:
        return sorted(self.s.versions.values(), key=lambda v: (v.subject, v.version))

    def add_version(self, version: SubjectVersion) -> None:
        self.s.versions[(version.subject, version.version)] = version

    def set_deleted(self, subject: str, version: int) -> None:
        old = self.s.versions[(subject, version)]
        self.s.versions[(subject, version)] = SubjectVersion(subject, version, old.schema_id, True)

    def remove_version(self, subject: str, version: int) -> None:
        self.s.versions.pop((subject, version), None)

    def schemas_referencing(self, subject: str, version: int) -> list[tuple[str, int]]:
        return sorted(
            (s.context, s.id)
            for s in self.s.schemas.values()
            if any(r.subject == subject and r.version == version for r in s.references)
        )

    def get_config(self, subject: str) -> dict[str, object] | None:
        found = self.s.config.get(subject)
        return dict(found) if found is not None else None

    def put_config(self, subject: str, config: dict[str, object]) -> None:
        self.s.config[subject] = dict(config)

    def delete_config(self, subject: str) -> None:
        self.s.config.pop(subject, None)

    def get_mode(self, subject: str) -> str | None:
        return self.s.mode.get(subject)

    def put_mode(self, subject: str, mode: str) -> None:
        self.s.mode[subject] = mode

    def delete_mode(self, subject: str) -> None:
        self.s.mode.pop(subject, None)


class MemorySchemaStore(SchemaStore):
    """Process-local, lost on exit. Writes work on a copy that replaces the state on commit."""

    def __init__(self) -> None:
        self._state = _State()
        self._lock = threading.RLock()

    @contextmanager
    def read(self) -> Iterator[StoreTransaction]:
        with self._lock:
            yield _MemoryTransaction(self._state)

    @contextmanager
    def write(self) -> Iterator[StoreTransaction]:
        with self._lock:
            work = self._state.copy()
            yield _MemoryTransaction(work)
            self._state = work

    def close(self) -> None:
        pass
