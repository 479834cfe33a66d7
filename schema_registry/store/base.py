"""The SchemaStore contract: what the registry keeps durably and the guarantees it needs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass

__all__ = [
    "DEFAULT_CONTEXT",
    "Reference",
    "StoredSchema",
    "SubjectVersion",
    "SchemaStore",
    "StoreTransaction",
    "context_of",
]

DEFAULT_CONTEXT = "."


def context_of(subject: str | None) -> str:
    """The schema context of a (qualified) subject: ``:.ctx:name`` -> ``.ctx``; else ``.``.

    Each context has its own id space, as in Confluent's schema contexts."""
    if subject and subject.startswith(":."):
        end = subject.find(":", 1)
        if end > 0:
            return subject[1:end]
    return DEFAULT_CONTEXT


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """A schema under its global id. Immutable: an id never changes meaning."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    fingerprint: str
    context: str = DEFAULT_CONTEXT
    extras: str = ""
    """Compact JSON of the schema's ``metadata`` / ``ruleSet`` (data contracts), or ""."""


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool


class StoreTransaction(ABC):
    """Operations inside one transaction. ``subject=""`` keys the global config and mode.

    Schema ids are scoped by context (``.`` is the default context); a subject's
    versions point at ids in the subject's own context (:func:`context_of`)."""

    @abstractmethod
    def schema_by_id(
        self, schema_id: int, context: str = DEFAULT_CONTEXT
    ) -> StoredSchema | None: ...

    @abstractmethod
    def schema_id_by_fingerprint(
        self, fingerprint: str, context: str = DEFAULT_CONTEXT
    ) -> int | None: ...

    @abstractmethod
    def add_schema(self, schema: StoredSchema) -> None: ...

    @abstractmethod
    def schemas_by_fingerprint_prefix(self, prefix: str) -> list[StoredSchema]:
        """Schemas (any context) whose fingerprint starts with ``prefix`` (lowercase hex)."""

    @abstractmethod
    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        """A fresh id in ``context`` above every id ever allocated or imported there."""

    @abstractmethod
    def note_imported_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        """Keep later allocations above an id chosen by an IMPORT."""

    @abstractmethod
    def subjects(self) -> list[str]:
        """Every subject that has a version row (soft-deleted or not), sorted."""

    @abstractmethod
    def versions(self, subject: str) -> list[SubjectVersion]:
        """The subject's version rows, soft-deleted included, in version order."""

    @abstractmethod
    def versions_of_schema(
        self, schema_id: int, context: str = DEFAULT_CONTEXT
    ) -> list[SubjectVersion]: ...

    @abstractmethod
    def all_versions(self) -> list[SubjectVersion]: ...

    @abstractmethod
    def add_version(self, version: SubjectVersion) -> None: ...

    @abstractmethod
    def set_deleted(self, subject: str, version: int) -> None: ...

    @abstractmethod
    def remove_version(self, subject: str, version: int) -> None: ...

    @abstractmethod
    def schemas_referencing(self, subject: str, version: int) -> list[tuple[str, int]]:
        """(context, id) of schemas whose references name ``subject`` at ``version``."""

    @abstractmethod
    def get_config(self, subject: str) -> dict[str, object] | None: ...

    @abstractmethod
    def put_config(self, subject: str, config: dict[str, object]) -> None: ...

    @abstractmethod
    def delete_config(self, subject: str) -> None: ...

    @abstractmethod
    def get_mode(self, subject: str) -> str | None: ...

    @abstractmethod
    def put_mode(self, subject: str, mode: str) -> None: ...

    @abstractmethod
    def delete_mode(self, subject: str) -> None: ...


class SchemaStore(ABC):
    """Durable registry state.

    Guarantees: ``write()`` transactions are serialised against every other
    write on the same store -- across threads and, for SQL stores, across
    processes sharing the database -- and are atomic: committed when the block
    exits normally, rolled back if it raises (the memory store rolls back by
    discarding a copy). A committed write survives a restart (except
    ``memory://``). ``read()`` sees a consistent committed state.
    """

    @abstractmethod
    def read(self) -> AbstractContextManager[StoreTransaction]: ...

    @abstractmethod
    def write(self) -> AbstractContextManager[StoreTransaction]: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> SchemaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
