"""Stream owners on PostgreSQL across connections (two brokers, one database)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg2
import pytest

from ingest.metadata import (
    ObjectRange,
    ObjectRecord,
    PostgresMetadataStore,
    StreamNotOwnedError,
)
from tests.support.postgres import temporary_database


@pytest.fixture
def pg_database() -> Iterator[str]:
    with temporary_database("tl_meta") as url:
        yield url


def _obj(oid: int, sid: int, start: int, end: int) -> ObjectRecord:
    return ObjectRecord(oid, f"k/{oid}", 10, "stream", (ObjectRange(sid, start, end, 0, 10),), 1)


def test_a_commit_racing_a_claim_waits_for_it_and_is_refused(pg_database: str) -> None:
    """The owner check row-locks the stream to the commit: a commit that starts
    while another broker's claim is uncommitted waits, then sees the new owner."""
    a_store, b_store = PostgresMetadataStore(pg_database), PostgresMetadataStore(pg_database)
    sid = a_store.create_stream()
    a = ("A", a_store.claim_writer("A"))
    b = ("B", b_store.claim_writer("B"))
    a_store.claim_streams([sid], writer=a)
    claimer = psycopg2.connect(pg_database)  # B's claim, held open
    with claimer.cursor() as cur:
        cur.execute("UPDATE streams SET owner = 'B', owner_epoch = owner_epoch + 1")
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            a_store.commit_object(_obj(a_store.next_object_id(), sid, 0, 5), writer=a)
        except BaseException as e:  # noqa: BLE001 - inspected below
            errors.append(e)

    t = threading.Thread(target=commit)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # waiting for the claim's row lock
    claimer.commit()
    claimer.close()
    t.join(10)
    assert len(errors) == 1 and isinstance(errors[0], StreamNotOwnedError)
    rec = b_store.get_stream(sid)
    assert rec is not None and (rec.end_offset, rec.owner) == (0, "B")
    b_store.commit_object(_obj(b_store.next_object_id(), sid, 0, 5), writer=b)
    a_store.close()
    b_store.close()


def test_concurrent_claims_of_overlapping_streams_do_not_deadlock(pg_database: str) -> None:
    stores = [PostgresMetadataStore(pg_database) for _ in range(3)]
    sids = [stores[0].create_stream() for _ in range(20)]
    writers = [(f"w{i}", s.claim_writer(f"w{i}")) for i, s in enumerate(stores)]
    failures: list[BaseException] = []

    def work(i: int) -> None:
        order = sids if i % 2 == 0 else list(reversed(sids))
        try:
            for _ in range(10):
                stores[i].claim_streams(order, writer=writers[i])
        except BaseException as e:  # noqa: BLE001 - inspected below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    epochs = {r.owner_epoch for r in stores[0].list_streams()}
    assert epochs == {30}
    for s in stores:
        s.close()


def test_owners_survive_reopen(pg_database: str) -> None:
    s = PostgresMetadataStore(pg_database)
    sid = s.create_stream()
    s.claim_streams([sid], writer=("A", s.claim_writer("A")))
    s.close()
    s = PostgresMetadataStore(pg_database)
    rec = s.get_stream(sid)
    assert rec is not None and (rec.owner, rec.owner_epoch) == ("A", 1)
    s.close()
