"""The embedded metadata store on SQLite.

Durability: the database runs in WAL journal mode with ``synchronous=FULL``,
so a call that returned has been fsync'd (each call is one transaction).
Thread safety: one connection shared by every thread, serialised by a lock;
async callers run calls through ``asyncio.to_thread``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ingest.metadata._sql import SqlMetadataStore
from ingest.metadata.errors import MetadataError

__all__ = ["SqliteMetadataStore"]

_SCHEMA_VERSION = 2

# columns added to tables after their first version: databases made before
# gain them on open (table, column, definition)
_ADDED_COLUMNS = (
    ("streams", "owner", "TEXT"),
    ("streams", "owner_epoch", "INTEGER NOT NULL DEFAULT 0"),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS writers (name TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
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
    stream_id INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS streams (
    stream_id INTEGER PRIMARY KEY,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    owner_epoch INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS objects (
    object_id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS object_ranges (
    object_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    stream_id INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    position INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (object_id, idx)
);
CREATE INDEX IF NOT EXISTS object_ranges_by_stream
    ON object_ranges (stream_id, end_offset);
CREATE TABLE IF NOT EXISTS group_offsets (
    grp TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    "offset" INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT,
    commit_ms INTEGER NOT NULL,
    PRIMARY KEY (grp, topic, partition)
);
CREATE TABLE IF NOT EXISTS txn_checkpoints (
    stream_id INTEGER PRIMARY KEY,
    stable_offset INTEGER NOT NULL,
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


class SqliteMetadataStore(SqlMetadataStore):
    """A :class:`~ingest.metadata.api.MetadataStore` in one SQLite file.

    ``path`` may be ``":memory:"`` for a private in-process database.
    """

    def __init__(self, path: str | Path) -> None:
        path_str = str(path)
        if path_str != ":memory:":
            Path(path_str).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._conn = sqlite3.connect(
                path_str, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.executescript(_SCHEMA)
            with self._tx() as cur:
                for table, column, definition in _ADDED_COLUMNS:
                    cur.execute(f"PRAGMA table_info({table})")
                    if column not in {r[1] for r in cur.fetchall()}:
                        cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                cur.execute(
                    "INSERT INTO kv(key, value) VALUES ('__schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(_SCHEMA_VERSION),),
                )
        except sqlite3.Error as e:
            raise MetadataError(f"cannot open metadata store at {path_str}: {e}") from e

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        """One serialised, immediate transaction."""
        with self._lock:
            cur = self._conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                cur.execute("COMMIT")
            except sqlite3.Error as e:
                raise MetadataError(f"metadata store error: {e}") from e
            finally:
                cur.close()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
