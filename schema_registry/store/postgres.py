"""PostgreSQL SchemaStore (``postgresql://...``): one registry shared by every broker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from schema_registry.errors import StoreError
from schema_registry.store.base import SchemaStore, StoreTransaction
from schema_registry.store.sql import SCHEMA_DDL, SqlTransaction

__all__ = ["PostgresSchemaStore"]

# Key of the transaction-scoped advisory lock that serialises registry writes cluster-wide.
_WRITE_LOCK_KEY = 0x7469_6465_7372  # "tidesr"


class PostgresSchemaStore(SchemaStore):
    """Writes take ``pg_advisory_xact_lock`` so that id allocation and "same schema, same id"
    hold across every process sharing the database; they commit before returning. A
    ``schema`` is created if missing."""

    def __init__(self, dsn: str, *, schema: str | None = None, max_connections: int = 4) -> None:
        import psycopg2
        import psycopg2.pool

        self._errors: tuple[type[BaseException], ...] = (psycopg2.Error,)
        if schema is not None and not schema.replace("_", "").isalnum():
            raise StoreError(f"invalid PostgreSQL schema name {schema!r}")
        self._schema = schema
        options = f"-c search_path={schema}" if schema else None
        try:
            self._pool: Any = (
                psycopg2.pool.ThreadedConnectionPool(
                    max_connections, max_connections, dsn, options=options
                )
                if options
                else psycopg2.pool.ThreadedConnectionPool(max_connections, max_connections, dsn)
            )
        except psycopg2.Error as exc:
            raise StoreError(f"cannot connect to the schema store: {exc}") from exc
        self._ready = False
        # psycopg2's pool closes connections returned above ``minconn``, so min == max keeps
        # every connection open; the semaphore makes callers wait for one instead of failing.
        self._slots = threading.BoundedSemaphore(max_connections)
        with self.write() as _:
            pass  # creates tables under the lock

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[StoreTransaction]:
        with self._slots:
            conn = self._pool.getconn()
            broken = False
            try:
                with conn.cursor() as cur:
                    if write:
                        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK_KEY,))
                        if not self._ready:
                            if self._schema:  # created by the first process, under the lock
                                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
                            for ddl in SCHEMA_DDL:
                                cur.execute(ddl)
                            self._ready = True
                    try:
                        yield SqlTransaction(cur, "%s")
                    except BaseException:
                        broken = not self._rollback(conn)
                        raise
                    conn.commit()
            except self._errors as exc:
                broken = not self._rollback(conn)
                raise StoreError(f"schema store error: {exc}") from exc
            finally:
                # a connection that cannot even roll back is dropped, not reused
                self._pool.putconn(conn, close=broken or bool(conn.closed))

    def _rollback(self, conn: Any) -> bool:
        try:
            conn.rollback()
            return True
        except self._errors:
            return False

    def read(self) -> AbstractContextManager[StoreTransaction]:
        return self._transaction(False)

    def write(self) -> AbstractContextManager[StoreTransaction]:
        return self._transaction(True)

    def close(self) -> None:
        self._pool.closeall()
