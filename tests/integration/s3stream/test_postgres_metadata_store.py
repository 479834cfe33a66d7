"""The metadata store contract over PostgreSQL (127.0.0.1:5432), one schema per test.

(It lives here until tests/integration/metadata/ has an owner.)"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ingest.metadata import (
    MetadataStore,
    ObjectRange,
    ObjectRecord,
    WriterFencedError,
    open_metadata_store,
)
from ingest.metadata.postgres import PostgresMetadataStore
from tests.unit.metadata.test_contract import MetadataStoreContract

DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _admin() -> Any:
    import psycopg2

    try:
        conn = psycopg2.connect(DSN, connect_timeout=3)
    except psycopg2.OperationalError as exc:  # pragma: no cover - no server here
        pytest.fail(f"PostgreSQL not reachable on 127.0.0.1:5432: {exc}")
    conn.autocommit = True
    return conn


@pytest.fixture
def pg_url() -> Iterator[str]:
    conn = _admin()
    name = f"md_test_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{DSN}?schema={name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.close()


class TestPostgresMetadataStore(MetadataStoreContract):
    @pytest.fixture
    def store(self, pg_url: str) -> Iterator[MetadataStore]:
        s = open_metadata_store(pg_url)
        assert isinstance(s, PostgresMetadataStore)
        yield s
        s.close()


def test_ids_are_unique_across_connections(pg_url: str) -> None:
    stores = [open_metadata_store(pg_url) for _ in range(3)]
    out: list[int] = []
    lock = threading.Lock()

    def work(s: MetadataStore) -> None:
        for _ in range(30):
            ids = (s.create_stream(), s.next_object_id(), s.allocate_producer_id())
            with lock:
                out.extend(ids)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 270
    streams = stores[0].list_streams()
    assert len({r.stream_id for r in streams}) == 90
    for s in stores:
        s.close()


def test_writer_claims_across_connections_get_distinct_epochs(pg_url: str) -> None:
    stores = [open_metadata_store(pg_url) for _ in range(3)]
    out: list[int] = []
    lock = threading.Lock()

    def work(s: MetadataStore) -> None:
        for _ in range(20):
            epoch = s.claim_writer("s3stream:streams/")
            with lock:
                out.append(epoch)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == list(range(1, 61))
    for s in stores:
        s.close()


def test_a_commit_racing_a_claim_waits_for_it_and_is_fenced(pg_url: str) -> None:
    """The epoch check holds its row lock to the commit: a commit of the old
    epoch that starts while a successor's claim is uncommitted waits for the
    claim, then sees the new epoch and changes nothing."""
    old_store = open_metadata_store(pg_url)
    old = ("w", old_store.claim_writer("w"))
    sid = old_store.create_stream()
    oid = old_store.next_object_id()
    obj = ObjectRecord(oid, "k", 10, "stream_set", (ObjectRange(sid, 0, 5, 0, 10),), 1)
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            old_store.commit_object(obj, writer=old)
        except BaseException as e:  # noqa: BLE001 - inspected below
            errors.append(e)

    claimer = _admin()
    claimer.autocommit = False
    schema = pg_url.rsplit("schema=", 1)[1]
    t = threading.Thread(target=commit)
    try:
        with claimer.cursor() as cur:
            cur.execute(f'SET search_path TO "{schema}"')
            cur.execute("UPDATE writers SET epoch = epoch + 1 WHERE name = 'w'")
        t.start()
        t.join(0.5)
        waited = t.is_alive()  # blocked on the claim's row lock
    finally:
        claimer.commit()
    t.join(10)
    assert waited
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], WriterFencedError)
    rec = old_store.get_stream(sid)
    assert rec is not None and rec.end_offset == 0
    assert old_store.list_objects() == []
    claimer.close()
    old_store.close()


def test_data_survives_reconnect(pg_url: str) -> None:
    s = open_metadata_store(pg_url)
    sid = s.create_stream()
    s.put_kv("cluster.id", "x")
    s.close()
    s = open_metadata_store(pg_url)
    assert s.get_stream(sid) is not None and s.get_kv("cluster.id") == "x"
    s.close()
