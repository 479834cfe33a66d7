"""One contract over every TxnStore: the in-memory one and the one on each
metadata store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata.memory import MemoryMetadataStore
from ingest.metadata.sqlite import SqliteMetadataStore
from ingest.txn import (
    MemoryTxnStore,
    MetadataTxnStore,
    PendingOffset,
    TxnRecord,
    TxnState,
    TxnStore,
)
from tests.support.postgres import temporary_database


@pytest.fixture(params=["memory", "metadata-memory", "metadata-sqlite", "metadata-postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TxnStore]:
    if request.param == "memory":
        yield MemoryTxnStore()
    elif request.param == "metadata-memory":
        yield MetadataTxnStore(MemoryMetadataStore())
    elif request.param == "metadata-sqlite":
        meta = SqliteMetadataStore(tmp_path / "meta.db")
        yield MetadataTxnStore(meta)
        meta.close()
    else:
        from ingest.metadata.postgres import PostgresMetadataStore

        with temporary_database() as url:
            meta = PostgresMetadataStore(url)
            yield MetadataTxnStore(meta)
            meta.close()


def _record(tid: str = "t1") -> TxnRecord:
    return TxnRecord(
        tid,
        producer_id=7,
        producer_epoch=3,
        timeout_ms=60_000,
        state=TxnState.ONGOING,
        last_producer_epoch=2,
        partitions={("orders", 0), ("orders", 2), ("a/b%_", 1)},
        groups={"g1", "g/2"},
        start_ms=1_000,
        update_ms=2_000,
    )


def test_put_get_round_trips_every_field(store: TxnStore) -> None:
    rec = _record()
    store.put(rec)
    got = store.get("t1")
    assert got == rec
    assert got is not rec


def test_unknown_id_is_none_and_put_replaces(store: TxnStore) -> None:
    assert store.get("nope") is None
    rec = _record()
    store.put(rec)
    rec.state = TxnState.COMPLETE_COMMIT
    rec.partitions = set()
    store.put(rec)
    got = store.get("t1")
    assert got is not None
    assert got.state is TxnState.COMPLETE_COMMIT and got.partitions == set()


def test_a_stored_record_does_not_follow_later_changes(store: TxnStore) -> None:
    rec = _record()
    store.put(rec)
    rec.partitions.add(("late", 9))
    got = store.get("t1")
    assert got is not None and ("late", 9) not in got.partitions


def test_all_lists_every_id_in_order_and_delete_forgets(store: TxnStore) -> None:
    for tid in ("b", "a", "c_%"):
        store.put(_record(tid))
    assert [r.transactional_id for r in store.all()] == ["a", "b", "c_%"]
    store.delete("b")
    store.delete("never")
    assert [r.transactional_id for r in store.all()] == ["a", "c_%"]
    assert store.get("b") is None


def test_offsets_are_kept_per_transaction_and_group(store: TxnStore) -> None:
    a = {("in", 0): PendingOffset("in", 0, 42, 5, "meta"), ("in", 1): PendingOffset("in", 1, 7)}
    store.put_offsets("t", "g1", a)
    store.put_offsets("t", "g/2", {("x", 3): PendingOffset("x", 3, 1)})
    store.put_offsets("t2", "g1", {("in", 2): PendingOffset("in", 2, 9)})
    store.put_offsets("t/", "g1", {("in", 5): PendingOffset("in", 5, 9)})
    assert store.get_offsets("t") == {"g1": a, "g/2": {("x", 3): PendingOffset("x", 3, 1)}}
    assert store.pending_partitions("g1") == {("in", 0), ("in", 1), ("in", 2), ("in", 5)}
    store.put_offsets("t", "g1", {("in", 0): PendingOffset("in", 0, 50)})  # replaces
    assert store.get_offsets("t")["g1"] == {("in", 0): PendingOffset("in", 0, 50)}
    store.delete_offsets("t")
    assert store.get_offsets("t") == {}
    assert store.pending_partitions("g1") == {("in", 2), ("in", 5)}
    assert store.pending_partitions("g/2") == set()
    assert store.all() == []  # offsets are no transaction records
