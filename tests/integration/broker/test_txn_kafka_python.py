"""kafka-python transactions: a transactional KafkaProducer commits and aborts,
read_committed consumers see exactly the committed records in order (and
nothing of a transaction still open), read_uncommitted consumers see all of
them, a consume-transform-produce loop moves its group's offsets only on
commit, and a second producer with the same transactional id fences the first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import (
    CommitFailedError,
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
)

from tests.integration.broker.conftest import RECENT_TS, create_topic, unique
from tests.support.platform import TidelakeProcess

# kafka-python 3.0 loads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _txn_producer(tidelake: TidelakeProcess, transactional_id: str) -> KafkaProducer:
    p = KafkaProducer(
        bootstrap_servers=tidelake.bootstrap,
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        max_block_ms=20_000,
        request_timeout_ms=15_000,
    )
    p.init_transactions()
    return p


def _send(p: KafkaProducer, topic: str, values: Iterable[str], partitions: int = 2) -> None:
    for v in values:
        i = int(v.split("-")[1])
        p.send(
            topic,
            key=v.encode(),
            value=v.encode(),
            partition=i % partitions,
            timestamp_ms=RECENT_TS + i,
        )
    p.flush(20)


def _read(
    tidelake: TidelakeProcess,
    topic: str,
    isolation_level: str,
    expect: int,
    partitions: int = 2,
    settle_s: float = 0.5,
    start: int | None = None,
) -> dict[int, list[str]]:
    """Everything a fresh consumer reads from the start of each partition (or
    from offset ``start``): it stops ``settle_s`` after the ``expect``-th
    record (and a Fetch answer for every partition), so that a record too
    many is seen too."""
    c = KafkaConsumer(
        bootstrap_servers=tidelake.bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        if start is not None:
            for p in range(partitions):
                c.seek(TopicPartition(topic, p), start)
        got: dict[int, list[str]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 30
        done_at: float | None = None
        while time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=200).items():
                got[tp.partition] += [m.value.decode() for m in msgs]
            n = sum(len(v) for v in got.values())
            fetched = all(c.highwater(tp) is not None for tp in c.assignment())
            if n >= expect and fetched and done_at is None:
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at > settle_s:
                break
        assert all(c.highwater(tp) is not None for tp in c.assignment()), "no Fetch answer"
        return got
    finally:
        c.close()


def _by_partition(values: Iterable[str], partitions: int = 2) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    for v in values:
        out[int(v.split("-")[1]) % partitions].append(v)
    return out


def test_read_committed_sees_exactly_the_committed_records_in_order(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kp-txn")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    p = _txn_producer(tidelake, unique("kp-tid"))
    try:
        p.begin_transaction()
        _send(p, topic, [f"c-{i}" for i in range(0, 6)])
        p.commit_transaction()
        p.begin_transaction()
        _send(p, topic, [f"a-{i}" for i in range(6, 12)])
        p.abort_transaction()
        p.begin_transaction()
        _send(p, topic, [f"c-{i}" for i in range(12, 18)])
        p.commit_transaction()
    finally:
        p.close(timeout=10)

    committed = [f"c-{i}" for i in [*range(0, 6), *range(12, 18)]]
    assert _read(tidelake, topic, "read_committed", len(committed)) == _by_partition(committed)
    everything = [*(f"c-{i}" for i in range(6)), *(f"a-{i}" for i in range(6, 12))]
    everything += [f"c-{i}" for i in range(12, 18)]
    assert _read(tidelake, topic, "read_uncommitted", len(everything)) == _by_partition(everything)
    # Each partition: three committed records (offsets 0-2), a marker (3),
    # three aborted ones (4-6), a marker (7), three committed ones (8-10). A
    # consumer starting inside the aborted transaction skips it too.
    last = [f"c-{i}" for i in range(12, 18)]
    assert _read(tidelake, topic, "read_committed", len(last), start=5) == _by_partition(last)


def _end_offset(tidelake: TidelakeProcess, topic: str, isolation_level: str) -> int:
    c = KafkaConsumer(bootstrap_servers=tidelake.bootstrap, isolation_level=isolation_level)
    try:
        tp = TopicPartition(topic, 0)
        return int(c.end_offsets([tp])[tp])
    finally:
        c.close()


def test_an_open_transaction_holds_read_committed_back_until_it_ends(
    tidelake: TidelakeProcess,
) -> None:
    """The last stable offset: a read_committed consumer sees nothing from the
    first offset of the earliest open transaction on, even records of another
    producer's transaction that committed meanwhile."""
    topic = unique("kp-open")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    first = _txn_producer(tidelake, unique("kp-tid"))
    second = _txn_producer(tidelake, unique("kp-tid"))
    try:
        first.begin_transaction()
        second.begin_transaction()
        for p, v in [(first, "f-0"), (second, "s-1"), (first, "f-2"), (second, "s-3")]:
            p.send(topic, value=v.encode(), partition=0).get(timeout=20)  # one batch each
        second.commit_transaction()  # its marker: offset 4
        assert _read(tidelake, topic, "read_committed", 0, partitions=1) == {0: []}
        assert _end_offset(tidelake, topic, "read_committed") == 0
        assert _read(tidelake, topic, "read_uncommitted", 4, partitions=1) == {
            0: ["f-0", "s-1", "f-2", "s-3"]
        }
        assert _end_offset(tidelake, topic, "read_uncommitted") == 5
        first.commit_transaction()
    finally:
        first.close(timeout=10)
        second.close(timeout=10)
    assert _read(tidelake, topic, "read_committed", 4, partitions=1) == {
        0: ["f-0", "s-1", "f-2", "s-3"]
    }
    assert _end_offset(tidelake, topic, "read_committed") == 6


def test_read_committed_skips_an_aborted_transaction_interleaved_with_a_committed_one(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kp-interleaved")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    aborting = _txn_producer(tidelake, unique("kp-tid"))
    committing = _txn_producer(tidelake, unique("kp-tid"))
    try:
        aborting.begin_transaction()
        committing.begin_transaction()
        for p, v in [
            (aborting, "a-0"),
            (committing, "c-1"),
            (aborting, "a-2"),
            (committing, "c-3"),
        ]:
            p.send(topic, value=v.encode(), partition=0).get(timeout=20)
        aborting.abort_transaction()
        committing.commit_transaction()
    finally:
        aborting.close(timeout=10)
        committing.close(timeout=10)
    assert _read(tidelake, topic, "read_committed", 2, partitions=1) == {0: ["c-1", "c-3"]}


def _committed(tidelake: TidelakeProcess, group: str, tp: TopicPartition) -> int | None:
    """The group's committed offset as a new member of it would find it."""
    c = KafkaConsumer(
        bootstrap_servers=tidelake.bootstrap, group_id=group, enable_auto_commit=False
    )
    try:
        offset: int | None = c.committed(tp)
        return offset
    finally:
        c.close()


def test_consume_transform_produce_moves_the_group_offsets_only_on_commit(
    tidelake: TidelakeProcess,
) -> None:
    src, dst, group = unique("kp-in"), unique("kp-out"), unique("kp-ctp")
    create_topic(tidelake.bootstrap, src, partitions=1)
    create_topic(tidelake.bootstrap, dst, partitions=1)
    plain = KafkaProducer(bootstrap_servers=tidelake.bootstrap, acks="all")
    for i in range(30):
        plain.send(src, value=str(i).encode(), partition=0)
    plain.flush(20)
    plain.close()

    tp = TopicPartition(src, 0)
    consumer = KafkaConsumer(
        src,
        bootstrap_servers=tidelake.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    producer = _txn_producer(tidelake, unique("kp-ctp-tid"))
    try:
        batches = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=500, max_records=7).get(tp, [])
            if not records:
                if tp in consumer.assignment() and consumer.position(tp) == 30:
                    break
                continue
            before = consumer.committed(tp)
            producer.begin_transaction()
            for m in records:
                producer.send(dst, value=b"x" + m.value, partition=0)
            next_offset = records[-1].offset + 1
            producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(next_offset, "", -1)}, consumer.group_metadata()
            )
            producer.flush(20)  # so that an aborted batch is in the log too
            batches += 1
            if batches % 2 == 0:
                # every second batch is aborted, then read again from the
                # group's committed offset, as a restarted loop would
                producer.abort_transaction()
                assert consumer.committed(tp) == before
                consumer.seek(tp, before if before is not None else 0)
            else:
                producer.commit_transaction()
                assert consumer.committed(tp) == next_offset
        assert consumer.position(tp) == 30
        assert batches >= 4  # at least two aborted
    finally:
        producer.close(timeout=10)
        consumer.close()

    assert _committed(tidelake, group, tp) == 30
    out = _read(tidelake, dst, "read_committed", 30, partitions=1)
    assert out == {0: [f"x{i}" for i in range(30)]}
    # the aborted copies are there for read_uncommitted, committed ones once
    dirty = _read(tidelake, dst, "read_uncommitted", 31, partitions=1)[0]
    assert len(dirty) > 30 and sorted(set(dirty)) == sorted(out[0])


def test_offsets_from_a_consumer_of_an_older_group_generation_are_refused(
    tidelake: TidelakeProcess,
) -> None:
    """KIP-447: the offsets name the consumer's group generation; after a
    rebalance, a loop still holding the old one cannot commit them."""
    src, dst, group = unique("kp-gen-in"), unique("kp-gen-out"), unique("kp-gen")
    create_topic(tidelake.bootstrap, src, partitions=2)
    create_topic(tidelake.bootstrap, dst, partitions=1)

    def member() -> KafkaConsumer:
        return KafkaConsumer(
            src,
            bootstrap_servers=tidelake.bootstrap,
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    first = member()
    second: KafkaConsumer | None = None
    producer = _txn_producer(tidelake, unique("kp-gen-tid"))
    try:
        deadline = time.monotonic() + 30
        while len(first.assignment()) < 2 and time.monotonic() < deadline:
            first.poll(timeout_ms=200)
        old = first.group_metadata()
        second = member()
        while time.monotonic() < deadline and not (
            len(first.assignment()) == 1 and len(second.assignment()) == 1
        ):
            first.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
        assert first.group_metadata().generation_id > old.generation_id

        producer.begin_transaction()
        producer.send(dst, value=b"out", partition=0).get(timeout=20)
        with pytest.raises(CommitFailedError, match="IllegalGeneration"):
            producer.send_offsets_to_transaction(
                {TopicPartition(src, 0): OffsetAndMetadata(5, "", -1)}, old
            )
        producer.abort_transaction()
        assert first.committed(TopicPartition(src, 0)) is None
    finally:
        producer.close(timeout=10)
        first.close()
        if second is not None:
            second.close()
    assert _read(tidelake, dst, "read_committed", 0, partitions=1) == {0: []}


def _fence(tidelake: TidelakeProcess, topic: str, tid: str) -> KafkaProducer:
    """A producer (returned) with records of an open transaction, fenced by a
    second producer with its transactional id, which commits records of its own."""
    zombie = _txn_producer(tidelake, tid)
    zombie.begin_transaction()
    _send(zombie, topic, ["z-0", "z-1"], partitions=1)
    successor = _txn_producer(tidelake, tid)  # aborts the zombie's transaction
    try:
        successor.begin_transaction()
        _send(successor, topic, ["s-2", "s-3"], partitions=1)
        successor.commit_transaction()
    finally:
        successor.close(timeout=10)
    return zombie


def test_a_second_producer_fences_the_first_at_its_next_commit(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kp-fence")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    zombie = _fence(tidelake, topic, unique("kp-fence-tid"))
    try:
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
        # fatal: the producer stays fenced
        with pytest.raises(KafkaError):
            zombie.begin_transaction()
    finally:
        zombie.close(timeout=5)
    assert _read(tidelake, topic, "read_committed", 2, partitions=1) == {0: ["s-2", "s-3"]}


def test_a_fenced_producer_cannot_write_into_the_partition_again(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kp-fence-send")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    zombie = _fence(tidelake, topic, unique("kp-fence-tid"))
    try:
        # Kafka answers a stale epoch on Produce with INVALID_PRODUCER_EPOCH
        # (abortable since 2.7). kafka-python then asks for a bumped epoch in
        # the background (InitProducerId naming its id and old epoch), which
        # the broker answers PRODUCER_FENCED: from then on the producer is
        # fenced. Until that answer arrives the client refuses to abort; after
        # it, its transactional calls fail with the stored ProducerFencedError
        # (kafka-python wraps it in a KafkaError naming it).
        with pytest.raises(InvalidProducerEpochError):
            zombie.send(topic, value=b"z-4", partition=0).get(timeout=20)
        error: KafkaError | None = None
        deadline = time.monotonic() + 20
        while error is None and time.monotonic() < deadline:
            try:
                zombie.abort_transaction()
            except KafkaError as exc:
                if "BUMPING_PRODUCER_EPOCH" in str(exc):
                    time.sleep(0.05)
                else:
                    error = exc
            else:
                break
        assert isinstance(error, ProducerFencedError) or "ProducerFencedError" in str(error), error
    finally:
        zombie.close(timeout=5)
    assert _read(tidelake, topic, "read_committed", 2, partitions=1) == {0: ["s-2", "s-3"]}
    # the zombie's first records are in the log, aborted; its last one is not
    dirty = _read(tidelake, topic, "read_uncommitted", 4, partitions=1)
    assert dirty == {0: ["z-0", "z-1", "s-2", "s-3"]}
