"""The SQL shared by the SQLite and PostgreSQL stores (portable SQL, ``?`` placeholders)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from schema_registry.store.base import (
    DEFAULT_CONTEXT,
    Reference,
    StoredSchema,
    StoreTransaction,
    SubjectVersion,
    context_of,
)

__all__ = ["SCHEMA_DDL", "SqlTransaction"]

SCHEMA_DDL = (
    """CREATE TABLE IF NOT EXISTS sr_schemas (
        context TEXT NOT NULL,
        id INTEGER NOT NULL,
        schema_type TEXT NOT NULL,
        schema_text TEXT NOT NULL,
        refs TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        extras TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (context, id))""",
    "CREATE INDEX IF NOT EXISTS sr_schemas_fingerprint ON sr_schemas (context, fingerprint)",
    "CREATE INDEX IF NOT EXISTS sr_schemas_guid ON sr_schemas (fingerprint)",
    """CREATE TABLE IF NOT EXISTS sr_schema_refs (
        context TEXT NOT NULL,
        schema_id INTEGER NOT NULL,
        ref_subject TEXT NOT NULL,
        ref_version INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS sr_schema_refs_target ON sr_schema_refs (ref_subject, ref_version)",
    """CREATE TABLE IF NOT EXISTS sr_versions (
        subject TEXT NOT NULL,
        version INTEGER NOT NULL,
        context TEXT NOT NULL,
        schema_id INTEGER NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (subject, version))""",
    "CREATE INDEX IF NOT EXISTS sr_versions_schema ON sr_versions (context, schema_id)",
    "CREATE TABLE IF NOT EXISTS sr_config (subject TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sr_mode (subject TEXT PRIMARY KEY, mode TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sr_counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)

_VERSION_COLS = "subject, version, schema_id, deleted"


def _version(row: Sequence[Any]) -> SubjectVersion:
    return SubjectVersion(str(row[0]), int(row[1]), int(row[2]), bool(row[3]))


def _holds_nul(args: Sequence[Any]) -> bool:
    """A NUL in a looked-up key: PostgreSQL text cannot hold one (its driver refuses the
    query), and the service never writes one, so no row matches, on either database."""
    return any(isinstance(arg, str) and "\x00" in arg for arg in args)


class SqlTransaction(StoreTransaction):
    """Runs the store operations on one DB-API cursor; ``param`` is the driver's placeholder."""

    def __init__(self, cursor: Any, param: str = "?") -> None:
        self._cur = cursor
        self._fix: Callable[[str], str] = (
            (lambda q: q) if param == "?" else (lambda q: q.replace("?", param))
        )

    def _exec(self, query: str, args: Sequence[Any] = ()) -> Any:
        self._cur.execute(self._fix(query), tuple(args))
        return self._cur

    def _all(self, query: str, args: Sequence[Any] = ()) -> list[Any]:
        if _holds_nul(args):
            return []
        return list(self._exec(query, args).fetchall())

    def _one(self, query: str, args: Sequence[Any] = ()) -> Any:
        if _holds_nul(args):
            return None
        return self._exec(query, args).fetchone()

    def schema_by_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        row = self._one(
            "SELECT id, schema_type, schema_text, refs, fingerprint, extras FROM sr_schemas "
            "WHERE context = ? AND id = ?",
            (context, schema_id),
        )
        if row is None:
            return None
        refs = tuple(
            Reference(r["name"], r["subject"], int(r["version"])) for r in json.loads(row[3])
        )
        return StoredSchema(
            int(row[0]), str(row[1]), str(row[2]), refs, str(row[4]), context, str(row[5] or "")
        )

    def schema_id_by_fingerprint(
        self, fingerprint: str, context: str = DEFAULT_CONTEXT
    ) -> int | None:
        row = self._one(
            "SELECT MIN(id) FROM sr_schemas WHERE context = ? AND fingerprint = ?",
            (context, fingerprint),
        )
        return None if row is None or row[0] is None else int(row[0])

    def add_schema(self, schema: StoredSchema) -> None:
        refs = json.dumps([r.to_json() for r in schema.references])
        self._exec(
            "INSERT INTO sr_schemas "
            "(context, id, schema_type, schema_text, refs, fingerprint, extras) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                schema.context,
                schema.id,
                schema.schema_type,
                schema.schema,
                refs,
                schema.fingerprint,
                schema.extras,
            ),
        )
        for ref in schema.references:
            self._exec(
                "INSERT INTO sr_schema_refs (context, schema_id, ref_subject, ref_version) "
                "VALUES (?, ?, ?, ?)",
                (schema.context, schema.id, ref.subject, ref.version),
            )
        self.note_imported_id(schema.id, schema.context)

    def schemas_by_fingerprint_prefix(self, prefix: str) -> list[StoredSchema]:
        rows = self._all(
            "SELECT context, id FROM sr_schemas WHERE fingerprint >= ? AND fingerprint < ? "
            "ORDER BY context, id",
            (prefix, prefix + "g"),
        )
        found = [self.schema_by_id(int(r[1]), str(r[0])) for r in rows]
        return [s for s in found if s is not None]

    def _counter(self, context: str) -> int:
        row = self._one("SELECT value FROM sr_counter WHERE name = ?", (f"next_id:{context}",))
        top = self._one("SELECT MAX(id) FROM sr_schemas WHERE context = ?", (context,))
        stored = int(row[0]) if row else 1
        return max(stored, int(top[0]) + 1 if top and top[0] is not None else 1)

    def _set_counter(self, context: str, value: int) -> None:
        self._exec(
            "INSERT INTO sr_counter (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (f"next_id:{context}", value),
        )

    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        value = self._counter(context)
        self._set_counter(context, value + 1)
        return value

    def note_imported_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        if self._counter(context) <= schema_id:
            self._set_counter(context, schema_id + 1)

    def subjects(self) -> list[str]:
        return [
            str(r[0])
            for r in self._all("SELECT DISTINCT subject FROM sr_versions ORDER BY subject")
        ]

    def versions(self, subject: str) -> list[SubjectVersion]:
        rows = self._all(
            f"SELECT {_VERSION_COLS} FROM sr_versions WHERE subject = ? ORDER BY version",
            (subject,),
        )
        return [_version(r) for r in rows]

    def versions_of_schema(
        self, schema_id: int, context: str = DEFAULT_CONTEXT
    ) -> list[SubjectVersion]:
        rows = self._all(
            f"SELECT {_VERSION_COLS} FROM sr_versions WHERE context = ? AND schema_id = ? "
            "ORDER BY subject, version",
            (context, schema_id),
        )
        return [_version(r) for r in rows]

    def all_versions(self) -> list[SubjectVersion]:
        rows = self._all(f"SELECT {_VERSION_COLS} FROM sr_versions ORDER BY subject, version")
        return [_version(r) for r in rows]

    def add_version(self, version: SubjectVersion) -> None:
        self._exec(
            "INSERT INTO sr_versions (subject, version, context, schema_id, deleted) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                version.subject,
                version.version,
                context_of(version.subject),
                version.schema_id,
                int(version.deleted),
            ),
        )

    def set_deleted(self, subject: str, version: int) -> None:
        self._exec(
            "UPDATE sr_versions SET deleted = 1 WHERE subject = ? AND version = ?",
            (subject, version),
        )

    def remove_version(self, subject: str, version: int) -> None:
        self._exec("DELETE FROM sr_versions WHERE subject = ? AND version = ?", (subject, version))

    def schemas_referencing(self, subject: str, version: int) -> list[tuple[str, int]]:
        rows = self._all(
            "SELECT DISTINCT context, schema_id FROM sr_schema_refs "
            "WHERE ref_subject = ? AND ref_version = ? ORDER BY context, schema_id",
            (subject, version),
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def get_config(self, subject: str) -> dict[str, object] | None:
        row = self._one("SELECT body FROM sr_config WHERE subject = ?", (subject,))
        return None if row is None else dict(json.loads(row[0]))

    def put_config(self, subject: str, config: dict[str, object]) -> None:
        self._exec(
            "INSERT INTO sr_config (subject, body) VALUES (?, ?) "
            "ON CONFLICT (subject) DO UPDATE SET body = excluded.body",
            (subject, json.dumps(config)),
        )

    def delete_config(self, subject: str) -> None:
        self._exec("DELETE FROM sr_config WHERE subject = ?", (subject,))

    def get_mode(self, subject: str) -> str | None:
        row = self._one("SELECT mode FROM sr_mode WHERE subject = ?", (subject,))
        return None if row is None else str(row[0])

    def put_mode(self, subject: str, mode: str) -> None:
        self._exec(
            "INSERT INTO sr_mode (subject, mode) VALUES (?, ?) "
            "ON CONFLICT (subject) DO UPDATE SET mode = excluded.mode",
            (subject, mode),
        )

    def delete_mode(self, subject: str) -> None:
        self._exec("DELETE FROM sr_mode WHERE subject = ?", (subject,))
