"""SQLite SchemaStore (``sqlite:////path/schemas.db``): the embedded default, one file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from schema_registry.store.base import SchemaStore, StoreTransaction
from schema_registry.store.sql import SCHEMA_DDL, SqlTransaction

__all__ = ["SqliteSchemaStore"]


class SqliteSchemaStore(SchemaStore):
    """One connection in WAL mode; writes use ``BEGIN IMMEDIATE`` so that they are serialised
    against other processes too, and are fsync'd (``synchronous=FULL``) on commit."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for ddl in SCHEMA_DDL:
                    self._conn.execute(ddl)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[StoreTransaction]:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute(begin)
            try:
                yield SqlTransaction(cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    def read(self) -> AbstractContextManager[StoreTransaction]:
        return self._transaction("BEGIN")

    def write(self) -> AbstractContextManager[StoreTransaction]:
        return self._transaction("BEGIN IMMEDIATE")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
