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

__all__ = ["PostgresMetadataStore"]

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
    deleted INTEGER NOT NULL DEFAULT 0
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
"""


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
        parts = urlsplit(dsn)
        query = dict(parse_qsl(parts.query))
        schema = query.pop("schema", None)
        if schema is not None and not schema.replace("_", "").isalnum():
            raise MetadataError(f"invalid schema name {schema!r}")
        clean = urlunsplit(parts._replace(query=urlencode(query)))
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._conn: Any = psycopg2.connect(clean, connect_timeout=10)
            self._conn.autocommit = False
            with self._conn.cursor() as cur:
                if schema is not None:
                    cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                    cur.execute(f'SET search_path TO "{schema}"')
                # one broker at a time creates the tables
                cur.execute("SELECT pg_advisory_xact_lock(7435012)")
                cur.execute(_SCHEMA)
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
