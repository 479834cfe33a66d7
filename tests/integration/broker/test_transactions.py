"""Kafka transactions with confluent-kafka (librdkafka): commit and abort,
read_committed against read_uncommitted, the last stable offset, zombie
fencing, the transaction timeout, exactly-once consume-transform-produce
(with the client killed at random points), and the admin APIs."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from tests.integration.broker.conftest import BROKER_ENV, admin, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

ENV = {**BROKER_ENV, "TIDELAKE_BROKER_TRANSACTION_ABORT_INTERVAL_MS": "100"}
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tidelake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("txn")) / "data", env=ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer(quiet({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf}))
    p.init_transactions(30)
    return p


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 20
) -> dict[int, list[bytes]]:
    """Every record a consumer with ``isolation`` reads, per partition, until
    the end of each partition."""
    c = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("reader"),
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
            }
        )
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                raise AssertionError(f"consume error: {m.error()}")
            at_end.discard(m.partition())
            out[m.partition()].append(m.value())
        assert len(at_end) == partitions, f"not at the end of every partition: {at_end}"
        return out
    finally:
        c.close()


def offsets(bootstrap: str, topic: str, partition: int, isolation: IsolationLevel) -> int:
    client = admin(bootstrap)  # kept alive until its futures resolve
    futures = client.list_offsets(
        {TopicPartition(topic, partition): OffsetSpec.latest()}, isolation_level=isolation
    )
    return int(next(iter(futures.values())).result(10).offset)


def test_read_committed_sees_exactly_the_committed_records_in_order(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-order")
    create_topic(bs, topic, partitions=3)
    tx = producer(bs, unique("tid"))
    plain = Producer(quiet({"bootstrap.servers": bs, "enable.idempotence": True}))
    expected: dict[int, list[bytes]] = {p: [] for p in range(3)}
    everything: dict[int, list[bytes]] = {p: [] for p in range(3)}
    for round_ in range(4):
        commit = round_ != 1 and round_ != 3
        tx.begin_transaction()
        for i in range(30):
            value = f"r{round_}-{i}".encode()
            tx.produce(topic, value=value, partition=i % 3)
            everything[i % 3].append(value)
            if commit:
                expected[i % 3].append(value)
        tx.flush(10)
        # records outside any transaction, between the transactions
        value = f"plain-{round_}".encode()
        plain.produce(topic, value=value, partition=round_ % 3)
        plain.flush(10)
        everything[round_ % 3].append(value)
        expected[round_ % 3].append(value)
        if commit:
            tx.commit_transaction(10)
        else:
            tx.abort_transaction(10)
    assert read_all(bs, topic, 3, "read_committed") == expected
    uncommitted = read_all(bs, topic, 3, "read_uncommitted")
    for p in range(3):
        assert sorted(uncommitted[p]) == sorted(everything[p])


def test_an_open_transaction_holds_read_committed_readers_at_its_first_record(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-lso")
    create_topic(bs, topic, partitions=1)
    tx = producer(bs, unique("tid"))
    tx.begin_transaction()
    tx.produce(topic, value=b"before", partition=0)
    tx.commit_transaction(10)
    tx.begin_transaction()
    for i in range(5):
        tx.produce(topic, value=b"open-%d" % i, partition=0)
    tx.flush(10)
    # the high watermark is past the open transaction; the last stable offset
    # stops at its first record (offset 2: "before", then its commit marker)
    assert offsets(bs, topic, 0, IsolationLevel.READ_UNCOMMITTED) == 7
    assert offsets(bs, topic, 0, IsolationLevel.READ_COMMITTED) == 2
    assert read_all(bs, topic, 1, "read_committed") == {0: [b"before"]}
    tx.commit_transaction(10)
    assert offsets(bs, topic, 0, IsolationLevel.READ_COMMITTED) == 8
    assert read_all(bs, topic, 1, "read_committed") == {
        0: [b"before"] + [b"open-%d" % i for i in range(5)]
    }


def test_a_second_producer_with_the_same_id_fences_the_first(tidelake: TidelakeProcess) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-zombie")
    create_topic(bs, topic, partitions=1)
    tid = unique("tid")
    zombie = producer(bs, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(10)
    fresh = producer(bs, tid)  # aborts the zombie's open transaction
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(10)
    with pytest.raises(KafkaException) as caught:
        zombie.produce(topic, value=b"zombie-again", partition=0)
        zombie.commit_transaction(10)
    err = caught.value.args[0]
    assert err.fatal() or err.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), err
    assert read_all(bs, topic, 1, "read_committed") == {0: [b"fresh"]}


def test_a_transaction_open_past_its_timeout_is_aborted(tidelake: TidelakeProcess) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-timeout")
    create_topic(bs, topic, partitions=1)
    # 3 s: long enough that the transaction is surely still open when first
    # looked at, on a loaded 2-core CI machine (1 s was not)
    slow = producer(bs, unique("tid"), **{"transaction.timeout.ms": 3000})
    slow.begin_transaction()
    slow.produce(topic, value=b"too-late", partition=0)
    slow.flush(10)
    assert offsets(bs, topic, 0, IsolationLevel.READ_COMMITTED) == 0
    deadline = time.monotonic() + 15
    while offsets(bs, topic, 0, IsolationLevel.READ_COMMITTED) == 0:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.1)
    # aborted: the marker is the only thing after the record, and nobody reading
    # committed data sees the record
    assert offsets(bs, topic, 0, IsolationLevel.READ_COMMITTED) == 2
    assert read_all(bs, topic, 1, "read_committed") == {0: []}
    with pytest.raises(KafkaException):
        slow.commit_transaction(10)


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    source, sink = unique("txn-in"), unique("txn-out")
    create_topic(bs, source, partitions=1)
    create_topic(bs, sink, partitions=1)
    group = unique("txn-group")
    c = Consumer(quiet({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False}))
    tx = producer(bs, unique("tid"))
    try:
        meta = c.consumer_group_metadata()
        tp = TopicPartition(source, 0)
        tx.begin_transaction()
        tx.produce(sink, value=b"x", partition=0)
        tx.send_offsets_to_transaction([TopicPartition(source, 0, 5)], meta, 10)
        tx.abort_transaction(10)
        assert c.committed([tp], timeout=10)[0].offset < 0
        tx.begin_transaction()
        tx.produce(sink, value=b"y", partition=0)
        tx.send_offsets_to_transaction([TopicPartition(source, 0, 7)], meta, 10)
        tx.commit_transaction(10)
        assert c.committed([tp], timeout=10)[0].offset == 7
    finally:
        c.close()


def _pipeline(bs: str, source: str, sink: str, group: str, tid: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.broker.txn_pipeline",
            bs,
            source,
            sink,
            group,
            tid,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _fill(bs: str, topic: str, count: int, partitions: int) -> None:
    p = Producer(quiet({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5}))
    for n in range(count):
        p.produce(topic, key=str(n).encode(), value=str(n).encode(), partition=n % partitions)
    assert p.flush(30) == 0


def _assert_exactly_once(bs: str, sink: str, count: int, partitions: int) -> None:
    got = read_all(bs, sink, partitions, "read_committed")
    seen = Counter(v for values in got.values() for v in values)
    want = Counter(b"out-%d" % n for n in range(count))
    assert seen == want, (
        f"missing {sorted((want - seen).elements())[:10]}, "
        f"duplicated {sorted((seen - want).elements())[:10]}"
    )


def test_consume_transform_produce_is_exactly_once_when_the_client_is_killed(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    source, sink = unique("ctp-in"), unique("ctp-out")
    create_topic(bs, source, partitions=2)
    create_topic(bs, sink, partitions=2)
    count = 600
    _fill(bs, source, count, 2)
    group, tid = unique("ctp-group"), unique("ctp-tid")
    rng = random.Random(20)
    for _ in range(3):
        proc = _pipeline(bs, source, sink, group, tid)
        time.sleep(rng.uniform(1.5, 4.0))
        proc.kill()  # kill -9, in the middle of whatever it was doing
        proc.wait()
    proc = _pipeline(bs, source, sink, group, tid)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()
    _assert_exactly_once(bs, sink, count, 2)


def test_describe_and_list_transactions(tidelake: TidelakeProcess) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-admin")
    create_topic(bs, topic, partitions=2)
    tid = unique("tid-admin")
    tx = producer(bs, tid)
    tx.begin_transaction()
    tx.produce(topic, value=b"a", partition=1)
    tx.flush(10)
    with RawClient(bs) as raw:
        described = raw.request(65, 0, {"transactional_ids": (tid,)})
        (ours,) = described.transaction_states
        assert ours.error_code == 0 and ours.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in ours.topics] == [(topic, [1])]
        assert ours.producer_id >= 0 and ours.transaction_start_time.year >= 2026
        # an unknown id: its start time is Kafka's -1, which kio's reader
        # refuses, so read the one error code from the bytes
        raw.send_frame(raw.encode(65, 0, {"transactional_ids": ("no-such-id",)}))
        frame = raw.recv_frame()
        # correlation id, header tags, throttle time, array length: then the error code
        assert int.from_bytes(frame[10:12], "big") == 105  # TRANSACTIONAL_ID_NOT_FOUND
        listed = raw.request(66, 1, {"state_filters": ("Ongoing",), "producer_id_filters": ()})
        assert tid in {s.transactional_id for s in listed.transaction_states}
        assert all(s.transaction_state == "Ongoing" for s in listed.transaction_states)
        tx.commit_transaction(10)
        listed = raw.request(66, 1, {"state_filters": ("Ongoing",), "producer_id_filters": ()})
        assert tid not in {s.transactional_id for s in listed.transaction_states}
        done = raw.request(66, 2, {"state_filters": (), "transactional_id_pattern": tid})
        assert [(s.transactional_id, s.transaction_state) for s in done.transaction_states] == [
            (tid, "CompleteCommit")
        ]


def test_describe_producers_shows_the_open_transaction_of_each_producer(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-producers")
    create_topic(bs, topic, partitions=1)
    tx = producer(bs, unique("tid"))
    tx.begin_transaction()
    tx.produce(topic, value=b"a", partition=0)
    tx.commit_transaction(10)  # offsets 0 (record) and 1 (marker)
    tx.begin_transaction()
    tx.produce(topic, value=b"b", partition=0)
    tx.flush(10)

    def describe() -> Any:
        with RawClient(bs) as raw:
            resp = raw.request(61, 0, {"topics": ({"name": topic, "partition_indexes": (0, 7)},)})
        (t,) = resp.topics
        return {int(p.partition_index): p for p in t.partitions}

    parts = describe()
    assert parts[7].error_code == KafkaError.UNKNOWN_TOPIC_OR_PART
    (state,) = parts[0].active_producers
    assert state.current_txn_start_offset == 2 and state.last_sequence >= 1
    tx.commit_transaction(10)
    (state,) = describe()[0].active_producers
    assert state.current_txn_start_offset == -1


def test_the_console_message_browser_reads_committed_records_unless_asked(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    topic = unique("txn-browser")
    create_topic(bs, topic, partitions=1)
    tx = producer(bs, unique("tid"))
    for value, commit in ((b"kept", True), (b"dropped", False), (b"open", None)):
        tx.begin_transaction()
        tx.produce(topic, value=value, partition=0)
        tx.flush(10)
        if commit is True:
            tx.commit_transaction(10)
        elif commit is False:
            tx.abort_transaction(10)

    def values(**params: str) -> list[str]:
        page = httpx.get(
            f"{tidelake.http_url}/api/v1/topics/{topic}/messages", params=params, timeout=10
        )
        assert page.status_code == 200, page.text
        return [m["value"]["text"] for m in page.json()["messages"]]

    assert values() == ["kept"]
    assert values(isolation="read_uncommitted") == ["kept", "dropped", "open"]
    tx.commit_transaction(10)
    assert values() == ["kept", "open"]
