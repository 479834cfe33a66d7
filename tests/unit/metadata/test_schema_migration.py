"""Databases made by an earlier version gain the new columns on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ingest.metadata import (
    ObjectRange,
    ObjectRecord,
    PostgresMetadataStore,
    ScramCredentialRecord,
    SqliteMetadataStore,
    StreamNotOwnedError,
    StreamRecord,
)
from ingest.metadata.api import MetadataStore
from tests.support.postgres import temporary_database

# the streams table before stream owners (the other tables are unchanged)
_OLD_STREAMS = """
CREATE TABLE streams (
    stream_id {int} PRIMARY KEY,
    start_offset {int} NOT NULL,
    end_offset {int} NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
INSERT INTO streams VALUES (1, 2, 7, 0);
INSERT INTO streams VALUES (2, 0, 0, 1);
"""


def _check_migrated(store: MetadataStore) -> None:
    assert store.list_streams() == [
        StreamRecord(1, 2, 7, False, None, 0),
        StreamRecord(2, 0, 0, True, None, 0),
    ]
    a = ("A", store.claim_writer("A"))
    assert store.claim_streams([1], writer=a) == {1: 1}
    obj = ObjectRecord(100, "k", 10, "stream", (ObjectRange(1, 7, 9, 0, 10),), 1)
    with pytest.raises(StreamNotOwnedError):
        store.commit_object(obj, writer=("B", store.claim_writer("B")))
    store.commit_object(obj, writer=a)
    assert store.get_stream(1) == StreamRecord(1, 2, 9, False, "A", 1)
    sid = store.create_stream()
    assert store.get_stream(sid) == StreamRecord(sid, 0, 0, False, None, 0)
    # and the SCRAM credentials table
    cred = ScramCredentialRecord("alice", "SCRAM-SHA-256", b"salt", b"stored", b"server", 4096)
    store.put_scram_credential(cred)
    assert store.list_scram_credentials() == [cred]


def test_an_old_sqlite_database_gains_stream_owners_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(_OLD_STREAMS.format(int="INTEGER"))
    conn.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    conn.execute("INSERT INTO counters VALUES ('stream_id', 2)")
    conn.commit()
    conn.close()
    s = SqliteMetadataStore(path)
    _check_migrated(s)
    assert s.get_kv("__schema_version") == "2"
    s.close()
    s = SqliteMetadataStore(path)  # a second open changes nothing
    assert s.get_stream(1) == StreamRecord(1, 2, 9, False, "A", 1)
    s.close()


@pytest.mark.parametrize("schema", [None, "tl_old"])
def test_an_old_postgres_database_gains_stream_owners_on_open(schema: str | None) -> None:
    import psycopg2

    with temporary_database("tl_meta") as url:
        conn = psycopg2.connect(url)
        with conn.cursor() as cur:
            if schema is not None:
                cur.execute(f"CREATE SCHEMA {schema}")
                cur.execute(f"SET search_path TO {schema}")
            cur.execute(_OLD_STREAMS.format(int="BIGINT"))
            cur.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)")
            cur.execute("INSERT INTO counters VALUES ('stream_id', 2)")
        conn.commit()
        conn.close()
        full = url if schema is None else f"{url}?schema={schema}"
        s = PostgresMetadataStore(full)
        _check_migrated(s)
        s.close()
        s = PostgresMetadataStore(full)
        assert s.get_stream(1) == StreamRecord(1, 2, 9, False, "A", 1)
        s.close()
