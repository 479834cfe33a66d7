"""The metadata store contract over PostgreSQL (127.0.0.1:5432), one schema per test.

(It lives here until tests/integration/metadata/ has an owner.)"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ingest.metadata import MetadataStore, open_metadata_store
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


def test_data_survives_reconnect(pg_url: str) -> None:
    s = open_metadata_store(pg_url)
    sid = s.create_stream()
    s.put_kv("cluster.id", "x")
    s.close()
    s = open_metadata_store(pg_url)
    assert s.get_stream(sid) is not None and s.get_kv("cluster.id") == "x"
    s.close()
