"""The metadata store on PostgreSQL (clusters: several brokers share it).

Each call is one transaction on one connection guarded by a lock (calls from
several threads are serialised; several processes or brokers are isolated by
PostgreSQL). ``?schema=name`` in the URL selects (and creates) a schema.
Counters (stream, object and producer ids) are single-row upserts, so ids
stay unique across brokers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ingest.metadata._sql import SqlMetadataStore
from ingest.metadata.errors import MetadataError

__all__ = ["PostgresMetadataStore", "connect_postgres", "is_transient"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS writers (name TEXT PRIMARY KEY, epoch BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    topic_id TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    replication_factor INTEGER NOT NULL,
    configs TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    stream_id BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS streams (
    stream_id BIGINT PRIMARY KEY,
    start_offset BIGINT NOT NULL,
    end_offset BIGINT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    owner_epoch BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS objects (
    object_id BIGINT PRIMARY KEY,
    key TEXT NOT NULL,
    size BIGINT NOT NULL,
    kind TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS object_ranges (
    object_id BIGINT NOT NULL,
    idx INTEGER NOT NULL,
    stream_id BIGINT NOT NULL,
    start_offset BIGINT NOT NULL,
    end_offset BIGINT NOT NULL,
    position BIGINT NOT NULL,
    length BIGINT NOT NULL,
    PRIMARY KEY (object_id, idx)
);
CREATE INDEX IF NOT EXISTS object_ranges_by_stream ON object_ranges (stream_id, end_offset);
CREATE TABLE IF NOT EXISTS group_offsets (
    grp TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    "offset" BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT,
    commit_ms BIGINT NOT NULL,
    PRIMARY KEY (grp, topic, partition)
);
CREATE TABLE IF NOT EXISTS txn_checkpoints (
    stream_id BIGINT PRIMARY KEY,
    stable_offset BIGINT NOT NULL,
    aborted TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scram_credentials (
    username TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    salt TEXT NOT NULL,
    stored_key TEXT NOT NULL,
    server_key TEXT NOT NULL,
    iterations INTEGER NOT NULL,
    PRIMARY KEY (username, mechanism)
);
CREATE TABLE IF NOT EXISTS acls (
    resource_type INTEGER NOT NULL,
    resource_name TEXT NOT NULL,
    pattern_type INTEGER NOT NULL,
    principal TEXT NOT NULL,
    host TEXT NOT NULL,
    operation INTEGER NOT NULL,
    permission INTEGER NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
);
"""

# columns added to tables after their first version: databases made before
# gain them on open (table, column, definition)
_ADDED_COLUMNS = (
    ("streams", "owner", "TEXT"),
    ("streams", "owner_epoch", "BIGINT NOT NULL DEFAULT 0"),
)

_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock


def connect_postgres(dsn: str) -> Any:
    """Open a psycopg2 connection (autocommit off) to the libpq URL ``dsn``.

    A ``schema`` query parameter selects that schema for the session; it is
    created if missing (under an advisory lock, so brokers starting together
    do not race). Raises ``MetadataError`` for an invalid schema name and
    ``psycopg2.Error`` if the server refuses. Shared by every store that keeps
    its tables in the metadata database (the cluster store, for one).
    """
    import psycopg2

    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", None)
    if schema is not None and not schema.replace("_", "").isalnum():
        raise MetadataError(f"invalid schema name {schema!r}")
    clean = urlunsplit(parts._replace(query=urlencode(query)))
    conn: Any = psycopg2.connect(clean, connect_timeout=10)
    conn.autocommit = False
    try:
        if schema is not None:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(7435011)")
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                cur.execute(f'SET search_path TO "{schema}"')
            conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


def is_transient(error: BaseException) -> bool:
    """Whether a psycopg2 error is worth retrying the whole transaction for
    (a serialization failure or a deadlock: nothing of it was applied)."""
    return getattr(error, "pgcode", None) in _TRANSIENT_SQLSTATES


def _add_missing_columns(cur: Any) -> None:
    """ALTER only what is missing: an ALTER TABLE locks the table exclusively
    even when it changes nothing."""
    for table, column, definition in _ADDED_COLUMNS:
        cur.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s AND column_name = %s",
            (table, column),
        )
        if cur.fetchone() is None:
            cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


class _QmarkCursor:
    """Adapts a psycopg2 cursor to the ``?`` placeholders of the shared SQL."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> Any:
        rows = [tuple(p) for p in params]
        if rows:
            self._cur.executemany(sql.replace("?", "%s"), rows)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur.fetchall())


class PostgresMetadataStore(SqlMetadataStore):
    """A :class:`~ingest.metadata.api.MetadataStore` in PostgreSQL.

    ``dsn`` is a libpq URL (``postgresql://user:pass@host:5432/db``); a
    ``schema`` query parameter selects the schema (created if missing).
    """

    _greatest = "GREATEST"
    _for_update = " FOR UPDATE"
    _for_share = " FOR SHARE"

    def __init__(self, dsn: str) -> None:
        import psycopg2

        self._psycopg2: Any = psycopg2
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._conn: Any = connect_postgres(dsn)
            with self._conn.cursor() as cur:
                # one broker at a time creates (or migrates) the tables
                cur.execute("SELECT pg_advisory_xact_lock(7435012)")
                cur.execute(_SCHEMA)
                _add_missing_columns(cur)
            self._conn.commit()
        except psycopg2.Error as e:
            raise MetadataError(f"cannot open the PostgreSQL metadata store: {e}") from e

    @contextmanager
    def _tx(self) -> Iterator[_QmarkCursor]:
        with self._lock:
            if self._closed:
                raise MetadataError("the metadata store is closed")
            try:
                with self._conn.cursor() as raw:
                    try:
                        yield _QmarkCursor(raw)
                    except BaseException:
                        self._conn.rollback()
                        raise
                self._conn.commit()
            except self._psycopg2.Error as e:
                try:
                    self._conn.rollback()
                except self._psycopg2.Error:
                    pass
                raise MetadataError(f"metadata store error: {e}") from e

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
