"""One contract suite over every MetadataStore implementation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.errors import ConfigError, StorageError
from ingest.metadata import (
    CommittedOffset,
    MemoryMetadataStore,
    MetadataError,
    MetadataStore,
    ObjectRange,
    ObjectRecord,
    ScramCredentialRecord,
    SqliteMetadataStore,
    StreamNotOwnedError,
    StreamRecord,
    TopicExistsError,
    TopicRecord,
    UnknownStreamError,
    UnknownTopicError,
    WriterFencedError,
    open_metadata_store,
)
from ingest.metadata.api import AbortedTxn, TxnCheckpoint


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataStore]:
    s: MetadataStore
    if request.param == "memory":
        s = MemoryMetadataStore()
    else:
        s = SqliteMetadataStore(tmp_path / "meta.db")
    yield s
    s.close()


def _topic(name: str = "orders", partitions: int = 2) -> TopicRecord:
    return TopicRecord(name, f"id-{name}", partitions, 1, {"retention.ms": "1000"})


def _object(oid: int, *ranges: tuple[int, int, int]) -> ObjectRecord:
    rs = []
    pos = 0
    for sid, s, e in ranges:
        rs.append(ObjectRange(sid, s, e, pos, 100))
        pos += 100
    return ObjectRecord(oid, f"k/{oid}", pos, "stream_set", tuple(rs), 123)


class MetadataStoreContract:
    """Subclass with a ``store`` fixture yielding an empty store."""

    def test_create_topic_then_get_and_list(self, store: MetadataStore) -> None:
        store.create_topic(_topic(), [10, 11])
        assert store.get_topic("orders") == _topic()
        assert [t.name for t in store.list_topics()] == ["orders"]
        parts = store.list_partitions("orders")
        assert [(p.partition, p.stream_id) for p in parts] == [(0, 10), (1, 11)]

    def test_create_existing_topic_raises_topic_exists(self, store: MetadataStore) -> None:
        store.create_topic(_topic(), [1, 2])
        with pytest.raises(TopicExistsError):
            store.create_topic(_topic(), [3, 4])
        assert [p.stream_id for p in store.list_partitions("orders")] == [1, 2]

    def test_unknown_topic_get_returns_none_and_changes_raise(self, store: MetadataStore) -> None:
        assert store.get_topic("nope") is None
        with pytest.raises(UnknownTopicError):
            store.delete_topic("nope")
        with pytest.raises(UnknownTopicError):
            store.set_topic_configs("nope", {})
        with pytest.raises(UnknownTopicError):
            store.add_partitions("nope", [1])
        with pytest.raises(UnknownTopicError):
            store.list_partitions("nope")

    def test_delete_topic_returns_its_stream_ids(self, store: MetadataStore) -> None:
        store.create_topic(_topic(), [5, 6])
        assert store.delete_topic("orders") == [5, 6]
        assert store.get_topic("orders") is None
        store.create_topic(_topic(), [7, 8])  # the name is free again

    def test_set_topic_configs_replaces_overrides(self, store: MetadataStore) -> None:
        store.create_topic(_topic(), [1, 2])
        store.set_topic_configs("orders", {"cleanup.policy": "delete"})
        topic = store.get_topic("orders")
        assert topic is not None and topic.configs == {"cleanup.policy": "delete"}

    def test_add_partitions_appends_and_updates_count(self, store: MetadataStore) -> None:
        store.create_topic(_topic(), [1, 2])
        store.add_partitions("orders", [3])
        assert [(p.partition, p.stream_id) for p in store.list_partitions("orders")] == [
            (0, 1),
            (1, 2),
            (2, 3),
        ]
        topic = store.get_topic("orders")
        assert topic is not None and topic.partitions == 3

    def test_stream_ids_are_never_reused(self, store: MetadataStore) -> None:
        a = store.create_stream()
        store.delete_stream(a)
        b = store.create_stream()
        assert b > a
        rec = store.get_stream(a)
        assert rec is not None and rec.deleted
        assert [s.stream_id for s in store.list_streams()] == [a, b]

    def test_trim_stream_only_moves_forward(self, store: MetadataStore) -> None:
        sid = store.create_stream()
        store.trim_stream(sid, 10)
        store.trim_stream(sid, 5)
        rec = store.get_stream(sid)
        assert rec is not None and rec.start_offset == 10

    def test_unknown_stream_operations_raise(self, store: MetadataStore) -> None:
        assert store.get_stream(999) is None
        with pytest.raises(UnknownStreamError):
            store.trim_stream(999, 1)
        with pytest.raises(UnknownStreamError):
            store.delete_stream(999)
        with pytest.raises(UnknownStreamError):
            store.commit_object(_object(store.next_object_id(), (999, 0, 1)))

    def test_commit_object_advances_end_offset_and_indexes_ranges(
        self, store: MetadataStore
    ) -> None:
        a, b = store.create_stream(), store.create_stream()
        o1 = store.next_object_id()
        store.commit_object(_object(o1, (a, 0, 10), (b, 0, 5)))
        o2 = store.next_object_id()
        store.commit_object(_object(o2, (a, 10, 20)))
        assert o2 > o1
        ra, rb = store.get_stream(a), store.get_stream(b)
        assert ra is not None and ra.end_offset == 20
        assert rb is not None and rb.end_offset == 5
        assert [o.object_id for o in store.objects_for_stream(a, 0, 100)] == [o1, o2]
        assert [o.object_id for o in store.objects_for_stream(a, 10, 11)] == [o2]
        assert [o.object_id for o in store.objects_for_stream(a, 9, 10)] == [o1]
        assert store.objects_for_stream(a, 20, 30) == []
        assert [o.object_id for o in store.objects_for_stream(b, 0, 100)] == [o1]
        assert store.objects_for_stream(b, 0, 100)[0] == _object(o1, (a, 0, 10), (b, 0, 5))
        assert [o.object_id for o in store.list_objects()] == [o1, o2]

    def test_objects_for_stream_limit_returns_the_first_by_offset(
        self, store: MetadataStore
    ) -> None:
        a = store.create_stream()
        ids = []
        for i in range(4):
            ids.append(store.next_object_id())
            store.commit_object(_object(ids[-1], (a, i * 10, i * 10 + 10)))
        assert [o.object_id for o in store.objects_for_stream(a, 15, 100, 2)] == ids[1:3]
        assert [o.object_id for o in store.objects_for_stream(a, 0, 100, 1)] == ids[:1]

    def test_commit_object_removes_compacted_objects_atomically(self, store: MetadataStore) -> None:
        a = store.create_stream()
        o1, o2 = store.next_object_id(), store.next_object_id()
        store.commit_object(_object(o1, (a, 0, 10)))
        store.commit_object(_object(o2, (a, 10, 20)))
        o3 = store.next_object_id()
        store.commit_object(_object(o3, (a, 0, 20)), compacted=[o1, o2])
        assert [o.object_id for o in store.list_objects()] == [o3]
        assert [o.object_id for o in store.objects_for_stream(a, 0, 20)] == [o3]

    def test_commit_objects_adds_all_outputs_and_removes_inputs_at_once(
        self, store: MetadataStore
    ) -> None:
        a, b = store.create_stream(), store.create_stream()
        o1 = store.next_object_id()
        store.commit_object(_object(o1, (a, 0, 10), (b, 0, 10)))
        o2, o3 = store.next_object_id(), store.next_object_id()
        store.commit_objects([_object(o2, (a, 0, 10)), _object(o3, (b, 0, 10))], compacted=[o1])
        assert [o.object_id for o in store.list_objects()] == [o2, o3]
        assert [o.object_id for o in store.objects_for_stream(b, 0, 10)] == [o3]
        # one bad output: nothing of the commit happens, the input stays
        o4, o5 = store.next_object_id(), store.next_object_id()
        with pytest.raises(UnknownStreamError):
            store.commit_objects(
                [_object(o4, (a, 0, 10)), _object(o5, (999, 0, 10))], compacted=[o2, o3]
            )
        assert [o.object_id for o in store.list_objects()] == [o2, o3]
        assert store.next_object_id() > o5

    def test_delete_objects(self, store: MetadataStore) -> None:
        a = store.create_stream()
        oid = store.next_object_id()
        store.commit_object(_object(oid, (a, 0, 10)))
        store.delete_objects([oid])
        assert store.list_objects() == []
        assert store.objects_for_stream(a, 0, 10) == []
        rec = store.get_stream(a)
        assert rec is not None and rec.end_offset == 10  # offsets never go back

    def test_group_offsets_commit_fetch_delete(self, store: MetadataStore) -> None:
        o1 = CommittedOffset("t", 0, 5, 1, "m", 100)
        o2 = CommittedOffset("u", 1, 7, -1, None, 101)
        store.commit_offsets("g", [o1, o2])
        store.commit_offsets("g", [CommittedOffset("t", 0, 6, 1, None, 102)])
        assert store.fetch_offsets("g") == [CommittedOffset("t", 0, 6, 1, None, 102), o2]
        assert store.fetch_offsets("g", ["u"]) == [o2]
        assert store.fetch_offsets("other") == []
        assert store.list_offset_groups() == ["g"]
        store.delete_group_offsets("g")
        assert store.fetch_offsets("g") == []
        assert store.list_offset_groups() == []

    def test_producer_ids_are_unique(self, store: MetadataStore) -> None:
        ids = [store.allocate_producer_id() for _ in range(5)]
        assert len(set(ids)) == 5

    def test_kv_put_get(self, store: MetadataStore) -> None:
        assert store.get_kv("cluster.id") is None
        store.put_kv("cluster.id", "abc")
        store.put_kv("cluster.id", "def")
        assert store.get_kv("cluster.id") == "def"

    def test_kv_list_by_prefix_and_delete(self, store: MetadataStore) -> None:
        store.put_kv("txn/a", "1")
        store.put_kv("txn/b_%", "2")
        store.put_kv("TXN/c", "3")
        store.put_kv("txnx", "4")
        store.put_kv("other", "5")
        assert store.list_kv("txn/") == {"txn/a": "1", "txn/b_%": "2"}
        assert store.list_kv("txn/b_") == {"txn/b_%": "2"}
        assert store.list_kv("txn/_") == {}
        store.delete_kv("txn/a")
        store.delete_kv("txn/never")
        assert store.list_kv("txn/") == {"txn/b_%": "2"}
        assert store.get_kv("txn/a") is None

    def test_concurrent_calls_from_threads_are_serialised(self, store: MetadataStore) -> None:
        out: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            for _ in range(50):
                sid = store.create_stream()
                with lock:
                    out.append(sid)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(out)) == 200

    # --- writer epochs -------------------------------------------------------------
    def test_claim_writer_returns_increasing_epochs_from_one(self, store: MetadataStore) -> None:
        assert [store.claim_writer("s3stream:streams/") for _ in range(3)] == [1, 2, 3]

    def test_writer_names_have_independent_epochs(self, store: MetadataStore) -> None:
        assert store.claim_writer("a") == 1
        assert store.claim_writer("a") == 2
        assert store.claim_writer("b") == 1
        sid = store.create_stream()
        store.commit_object(_object(store.next_object_id(), (sid, 0, 5)), writer=("a", 2))
        store.commit_object(_object(store.next_object_id(), (sid, 5, 10)), writer=("b", 1))
        rec = store.get_stream(sid)
        assert rec is not None and rec.end_offset == 10

    def test_the_current_epoch_changes_stream_data(self, store: MetadataStore) -> None:
        w = ("w", store.claim_writer("w"))
        sid = store.create_stream()
        o1, o2, o3 = store.next_object_id(), store.next_object_id(), store.next_object_id()
        store.commit_object(_object(o1, (sid, 0, 10)), writer=w)
        store.commit_objects([_object(o2, (sid, 10, 20))], writer=w)
        store.commit_object(_object(o3, (sid, 0, 20)), compacted=[o1, o2], writer=w)
        store.trim_stream(sid, 20, writer=w)
        store.delete_objects([o3], writer=w)
        rec = store.get_stream(sid)
        assert rec is not None and (rec.start_offset, rec.end_offset) == (20, 20)
        assert store.list_objects() == []

    def test_a_stale_epoch_changes_nothing_and_raises_writer_fenced(
        self, store: MetadataStore
    ) -> None:
        old = ("w", store.claim_writer("w"))
        sid = store.create_stream()
        o1 = store.next_object_id()
        store.commit_object(_object(o1, (sid, 0, 10)), writer=old)
        new = ("w", store.claim_writer("w"))
        assert new[1] > old[1]
        before_objects = store.list_objects()
        before_stream = store.get_stream(sid)
        o2, o3 = store.next_object_id(), store.next_object_id()
        with pytest.raises(WriterFencedError):
            store.commit_object(_object(o2, (sid, 10, 20)), writer=old)
        with pytest.raises(WriterFencedError):
            store.commit_objects([_object(o2, (sid, 0, 20))], compacted=[o1], writer=old)
        with pytest.raises(WriterFencedError):
            store.commit_object(_object(o3, (sid, 0, 10)), compacted=[o1], writer=old)
        with pytest.raises(WriterFencedError):
            store.delete_objects([o1], writer=old)
        with pytest.raises(WriterFencedError):
            store.trim_stream(sid, 5, writer=old)
        with pytest.raises(WriterFencedError):
            store.delete_stream(sid, writer=old)
        streams = store.list_streams()
        with pytest.raises(WriterFencedError):
            store.create_stream(writer=old)
        assert store.list_streams() == streams
        with pytest.raises(WriterFencedError):  # an epoch never claimed
            store.commit_object(_object(o2, (sid, 10, 20)), writer=("w", new[1] + 1))
        with pytest.raises(WriterFencedError):  # a name never claimed
            store.delete_objects([o1], writer=("other", 1))
        assert store.list_objects() == before_objects
        assert store.get_stream(sid) == before_stream
        # the successor still writes
        store.commit_object(_object(o2, (sid, 10, 20)), writer=new)
        rec = store.get_stream(sid)
        assert rec is not None and rec.end_offset == 20

    def test_no_writer_keeps_unchecked_changes(self, store: MetadataStore) -> None:
        store.claim_writer("w")
        store.claim_writer("w")
        sid = store.create_stream()
        oid = store.next_object_id()
        store.commit_object(_object(oid, (sid, 0, 10)))
        store.trim_stream(sid, 10)
        store.delete_objects([oid])
        assert store.list_objects() == []

    def test_concurrent_claims_from_threads_get_distinct_epochs(self, store: MetadataStore) -> None:
        out: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            for _ in range(20):
                epoch = store.claim_writer("w")
                with lock:
                    out.append(epoch)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(out) == list(range(1, 81))

    # --- stream owners -----------------------------------------------------------------
    def test_claim_streams_makes_the_writer_owner_and_raises_the_owner_epoch(
        self, store: MetadataStore
    ) -> None:
        a_sid, b_sid = store.create_stream(), store.create_stream()
        rec = store.get_stream(a_sid)
        assert rec is not None and (rec.owner, rec.owner_epoch) == (None, 0)
        a = ("A", store.claim_writer("A"))
        b = ("B", store.claim_writer("B"))
        assert store.claim_streams([b_sid, a_sid, a_sid], writer=a) == {a_sid: 1, b_sid: 1}
        assert store.claim_streams([a_sid], writer=b) == {a_sid: 2}
        assert store.claim_streams([a_sid], writer=b) == {a_sid: 3}
        assert [(r.stream_id, r.owner, r.owner_epoch) for r in store.list_streams()] == [
            (a_sid, "B", 3),
            (b_sid, "A", 1),
        ]
        assert store.get_stream(b_sid) == StreamRecord(b_sid, 0, 0, False, "A", 1)

    def test_claim_then_commit_by_the_owner_succeeds(self, store: MetadataStore) -> None:
        sid = store.create_stream()
        w = ("A", store.claim_writer("A"))
        store.claim_streams([sid], writer=w)
        o1, o2 = store.next_object_id(), store.next_object_id()
        store.commit_object(_object(o1, (sid, 0, 10)), writer=w)
        store.commit_objects([_object(o2, (sid, 10, 20))], writer=w)
        store.trim_stream(sid, 5, writer=w)
        rec = store.get_stream(sid)
        assert rec is not None and (rec.start_offset, rec.end_offset) == (5, 20)
        assert [o.object_id for o in store.objects_for_stream(sid, 0, 20)] == [o1, o2]

    def test_a_commit_extending_another_writers_stream_is_refused_and_changes_nothing(
        self, store: MetadataStore
    ) -> None:
        mine, theirs = store.create_stream(), store.create_stream()
        a = ("A", store.claim_writer("A"))
        b = ("B", store.claim_writer("B"))
        store.claim_streams([theirs], writer=a)
        store.claim_streams([mine], writer=b)
        o1 = store.next_object_id()
        store.commit_object(_object(o1, (theirs, 0, 10)), writer=a)
        before = (store.list_streams(), store.list_objects())
        o2, o3 = store.next_object_id(), store.next_object_id()
        with pytest.raises(StreamNotOwnedError) as info:
            store.commit_object(_object(o2, (mine, 0, 5), (theirs, 10, 20)), writer=b)
        assert (info.value.stream_id, info.value.owner) == (theirs, "A")
        with pytest.raises(StreamNotOwnedError):  # partly new offsets count as adding
            store.commit_objects(
                [_object(o2, (mine, 0, 5)), _object(o3, (theirs, 5, 11))], compacted=[o1], writer=b
            )
        assert (store.list_streams(), store.list_objects()) == before
        rec = store.get_stream(theirs)
        assert rec is not None and rec.end_offset == 10
        assert store.objects_for_stream(mine, 0, 100) == []
        # the error is per stream: the writer is not fenced and goes on with its own
        store.commit_object(_object(o2, (mine, 0, 5)), writer=b)

    def test_a_compaction_of_another_writers_stream_rewrites_existing_offsets(
        self, store: MetadataStore
    ) -> None:
        sid = store.create_stream()
        a = ("A", store.claim_writer("A"))
        b = ("B", store.claim_writer("B"))
        store.claim_streams([sid], writer=a)
        o1, o2 = store.next_object_id(), store.next_object_id()
        store.commit_object(_object(o1, (sid, 0, 10)), writer=a)
        store.commit_object(_object(o2, (sid, 10, 20)), writer=a)
        o3 = store.next_object_id()
        store.commit_object(_object(o3, (sid, 0, 20)), compacted=[o1, o2], writer=b)
        assert [o.object_id for o in store.objects_for_stream(sid, 0, 20)] == [o3]
        rec = store.get_stream(sid)
        assert rec is not None and (rec.end_offset, rec.owner) == (20, "A")

    def test_trim_by_a_non_owner_is_refused(self, store: MetadataStore) -> None:
        sid = store.create_stream()
        a = ("A", store.claim_writer("A"))
        b = ("B", store.claim_writer("B"))
        store.claim_streams([sid], writer=a)
        store.commit_object(_object(store.next_object_id(), (sid, 0, 10)), writer=a)
        with pytest.raises(StreamNotOwnedError):
            store.trim_stream(sid, 5, writer=b)
        rec = store.get_stream(sid)
        assert rec is not None and rec.start_offset == 0
        with pytest.raises(UnknownStreamError):
            store.trim_stream(999, 5, writer=b)
        store.trim_stream(sid, 5, writer=a)
        rec = store.get_stream(sid)
        assert rec is not None and rec.start_offset == 5

    def test_calls_without_a_writer_and_deletes_ignore_owners(self, store: MetadataStore) -> None:
        sid = store.create_stream()
        a = ("A", store.claim_writer("A"))
        b = ("B", store.claim_writer("B"))
        store.claim_streams([sid], writer=a)
        store.commit_object(_object(store.next_object_id(), (sid, 0, 10)))
        store.trim_stream(sid, 5)
        store.delete_stream(sid, writer=b)  # any broker may delete a topic
        rec = store.get_stream(sid)
        assert rec is not None and rec.deleted and rec.end_offset == 10

    def test_claim_streams_by_a_fenced_writer_raises_and_claims_nothing(
        self, store: MetadataStore
    ) -> None:
        sid = store.create_stream()
        old = ("A", store.claim_writer("A"))
        store.claim_writer("A")
        with pytest.raises(WriterFencedError):
            store.claim_streams([sid], writer=old)
        with pytest.raises(WriterFencedError):  # a name never claimed
            store.claim_streams([sid], writer=("B", 1))
        rec = store.get_stream(sid)
        assert rec is not None and (rec.owner, rec.owner_epoch) == (None, 0)

    def test_claiming_an_unknown_or_deleted_stream_raises_and_claims_nothing(
        self, store: MetadataStore
    ) -> None:
        live, gone = store.create_stream(), store.create_stream()
        store.delete_stream(gone)
        w = ("A", store.claim_writer("A"))
        with pytest.raises(UnknownStreamError):
            store.claim_streams([live, 999], writer=w)
        with pytest.raises(UnknownStreamError):
            store.claim_streams([live, gone], writer=w)
        rec = store.get_stream(live)
        assert rec is not None and (rec.owner, rec.owner_epoch) == (None, 0)
        assert store.claim_streams([], writer=w) == {}

    def test_two_brokers_at_one_stream_only_the_last_claimer_adds(
        self, store: MetadataStore
    ) -> None:
        sid, other = store.create_stream(), store.create_stream()
        a = ("broker-1", store.claim_writer("broker-1"))
        b = ("broker-2", store.claim_writer("broker-2"))
        store.claim_streams([sid, other], writer=a)
        store.commit_object(_object(store.next_object_id(), (sid, 0, 10)), writer=a)
        # the partition moves: broker 2 claims the stream and opens it at 10
        assert store.claim_streams([sid], writer=b) == {sid: 2}
        late = store.next_object_id()
        with pytest.raises(StreamNotOwnedError):  # broker 1 wakes up late
            store.commit_object(_object(late, (sid, 10, 15), (other, 0, 3)), writer=a)
        store.commit_object(_object(store.next_object_id(), (sid, 10, 20)), writer=b)
        store.commit_object(_object(store.next_object_id(), (other, 0, 3)), writer=a)
        rec = store.get_stream(sid)
        assert rec is not None and (rec.end_offset, rec.owner, rec.owner_epoch) == (
            20,
            "broker-2",
            2,
        )
        assert late not in {o.object_id for o in store.list_objects()}
        with pytest.raises(StreamNotOwnedError):  # not even a range it had before
            store.commit_object(_object(store.next_object_id(), (sid, 15, 25)), writer=a)

    def test_txn_checkpoints_by_stream_latest_wins(self, store: MetadataStore) -> None:
        assert store.get_txn_checkpoint(7) is None
        first = TxnCheckpoint(10, (AbortedTxn(3, 2, 5), AbortedTxn(4, 6, 9)))
        store.put_txn_checkpoint(7, first)
        store.put_txn_checkpoint(8, TxnCheckpoint(0))
        assert store.get_txn_checkpoint(7) == first
        later = TxnCheckpoint(12, (AbortedTxn(4, 6, 9),))
        store.put_txn_checkpoint(7, later)
        assert store.get_txn_checkpoint(7) == later
        assert store.get_txn_checkpoint(8) == TxnCheckpoint(0, ())

    def test_scram_credentials_put_get_replace_list_delete(self, store: MetadataStore) -> None:
        a256 = ScramCredentialRecord("alice", "SCRAM-SHA-256", b"s1", b"k1", b"v1", 4096)
        a512 = ScramCredentialRecord("alice", "SCRAM-SHA-512", b"s2", b"\x00\xff", b"v2", 8192)
        bob = ScramCredentialRecord("bob", "SCRAM-SHA-256", b"s3", b"k3", b"v3", 4096)
        assert store.get_scram_credential("alice", "SCRAM-SHA-256") is None
        for r in (bob, a512, a256):
            store.put_scram_credential(r)
        assert store.get_scram_credential("alice", "SCRAM-SHA-512") == a512
        assert store.list_scram_credentials() == [a256, a512, bob]
        assert store.list_scram_credentials("alice") == [a256, a512]
        replaced = ScramCredentialRecord("alice", "SCRAM-SHA-256", b"s9", b"k9", b"v9", 5000)
        store.put_scram_credential(replaced)
        assert store.get_scram_credential("alice", "SCRAM-SHA-256") == replaced
        assert store.delete_scram_credentials("alice", "SCRAM-SHA-512")
        assert not store.delete_scram_credentials("alice", "SCRAM-SHA-512")
        assert store.list_scram_credentials() == [replaced, bob]
        assert store.delete_scram_credentials("bob")
        assert not store.delete_scram_credentials("nobody")
        assert store.list_scram_credentials() == [replaced]


class TestMetadataStoreContract(MetadataStoreContract):
    pass


def test_errors_derive_from_storage_error() -> None:
    assert issubclass(MetadataError, StorageError)
    assert issubclass(TopicExistsError, MetadataError)
    assert issubclass(UnknownTopicError, MetadataError)
    assert issubclass(WriterFencedError, MetadataError)
    assert issubclass(StreamNotOwnedError, MetadataError)
    assert not issubclass(StreamNotOwnedError, WriterFencedError)


def test_sqlite_store_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    s = SqliteMetadataStore(path)
    s.create_topic(_topic(), [1, 2])
    sid = s.create_stream()
    oid = s.next_object_id()
    s.commit_object(_object(oid, (sid, 0, 3)))
    pid = s.allocate_producer_id()
    s.close()
    s = SqliteMetadataStore(path)
    assert s.get_topic("orders") == _topic()
    rec = s.get_stream(sid)
    assert rec is not None and rec.end_offset == 3
    assert s.create_stream() > sid
    assert s.next_object_id() > oid
    assert s.allocate_producer_id() > pid
    s.close()


def test_sqlite_stores_on_one_file_claim_distinct_epochs(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    stores = [SqliteMetadataStore(path) for _ in range(3)]
    out: list[int] = []
    lock = threading.Lock()

    def work(s: MetadataStore) -> None:
        for _ in range(20):
            epoch = s.claim_writer("w")
            with lock:
                out.append(epoch)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == list(range(1, 61))
    # the last claim (through any instance) fences every other epoch
    sid = stores[0].create_stream()
    with pytest.raises(WriterFencedError):
        stores[1].commit_object(_object(stores[1].next_object_id(), (sid, 0, 1)), writer=("w", 59))
    stores[2].commit_object(_object(stores[2].next_object_id(), (sid, 0, 1)), writer=("w", 60))
    for s in stores:
        s.close()


def test_sqlite_database_without_the_writers_table_gains_it_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    s = SqliteMetadataStore(path)
    sid = s.create_stream()
    s._conn.execute("DROP TABLE writers")  # as a database made before writer epochs
    s.close()
    s = SqliteMetadataStore(path)
    assert s.get_stream(sid) is not None
    assert s.claim_writer("w") == 1
    s.close()


def test_sqlite_uses_wal_journal(tmp_path: Path) -> None:
    s = SqliteMetadataStore(tmp_path / "m.db")
    row = s._conn.execute("PRAGMA journal_mode").fetchone()
    assert row[0] == "wal"
    s.close()


def test_open_metadata_store_by_scheme(tmp_path: Path) -> None:
    m = open_metadata_store("memory://")
    assert isinstance(m, MemoryMetadataStore)
    s = open_metadata_store(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(s, SqliteMetadataStore)
    s.close()
    assert (tmp_path / "x.db").exists()
    with pytest.raises(ConfigError):
        open_metadata_store("mysql://host/db")
    with pytest.raises(MetadataError):  # nothing listens on port 1
        open_metadata_store("postgresql://127.0.0.1:1/db")
