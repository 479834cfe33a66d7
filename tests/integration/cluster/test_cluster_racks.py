"""Zero cross-AZ reads (issue #16, KIP-392) with real broker processes: four
brokers in two racks, consumers in both racks sending ``client.rack``. Every
record reaches every consumer exactly once and in order, the payload bytes
fetched across racks (the brokers' rack metric) stay under 5 % of the bytes
consumed, and a consumer whose replica broker is killed (kill -9) goes back to
the partition's leader and still gets everything.

Four brokers of its own, apart from test_cluster.py's shared cluster (each
broker holds PostgreSQL connections; the server allows a hundred)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.serial import entity_reader
from prometheus_client.parser import text_string_to_metric_families

from ingest.cluster.racks import preferred_read_replica
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.codec import response_class
from ingest.protocol.errors import ErrorCode
from tests.integration.broker.conftest import quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster
from tests.support.postgres import temporary_database

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}
ENDPOINTS = [BrokerEndpoint(n, "", 0, rack) for n, rack in RACKS.items()]
FETCH = 1
PARTITIONS = 8
UPLOAD_INTERVAL_MS = 300


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@contextmanager
def _rack_cluster(root: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ).create_bucket(Bucket=BUCKET)
    with temporary_database("tl_racks") as url:
        cluster = TidelakeCluster(
            root, url, s3_endpoint, {"TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": str(UPLOAD_INTERVAL_MS)}
        )
        try:
            for node, rack in RACKS.items():
                cluster.start_node(node, TIDELAKE_BROKER_RACK=rack)
            yield cluster
        finally:
            cluster.stop()


class _Reader(threading.Thread):
    """A consumer in ``rack`` reading every partition from the start."""

    def __init__(
        self, bootstrap: str, topic: str, rack: str, isolation: str = "read_committed"
    ) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": unique("racks"),
                    "client.rack": rack,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 200,
                    "isolation.level": isolation,
                }
            )
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                m = self.consumer.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                q, offset, value = m.partition(), m.offset(), m.value()
                assert q is not None and offset is not None and value is not None
                self.got[q].append((offset, value))
        finally:
            self.consumer.close()

    def count(self) -> int:
        return sum(len(v) for v in self.got.values())


def _produce(bootstrap: str, topic: str, first: int, per_partition: int) -> dict[int, list[bytes]]:
    p = Producer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "client.id": "racks-test,tidelake_rack=a",
            }
        )
    )
    sent: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    for i in range(first, first + per_partition):
        for q in range(PARTITIONS):
            value = (b"%d:%d:" % (q, i)).ljust(1000, b"x")
            p.produce(topic, value=value, partition=q)
            sent[q].append(value)
        p.poll(0)
    assert p.flush(60) == 0
    return sent


def _wait_for(readers: list[_Reader], want: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(r.count() < want for r in readers):
        assert time.monotonic() < deadline, [r.count() for r in readers]
        time.sleep(0.2)


def _rack_bytes(cluster: TidelakeCluster) -> dict[tuple[str, str, str], float]:
    """(broker rack, client rack, direction) -> payload bytes, over the live brokers."""
    out: dict[tuple[str, str, str], float] = {}
    for proc in cluster.live():
        with urllib.request.urlopen(f"{proc.http_url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name != "tidelake_rack_payload_bytes":
                continue
            for s in family.samples:
                key = (s.labels["broker_rack"], s.labels["client_rack"], s.labels["direction"])
                out[key] = out.get(key, 0) + s.value
    return out


def _raw_fetch(
    cluster: TidelakeCluster, node: int, version: int, topic: str, partition: int, rack: str
) -> Any:
    """One Fetch of ``partition`` from offset 0 sent to broker ``node``: its PartitionData."""
    request: dict[str, Any] = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    if version >= 11:
        request["rack_id"] = rack
    with RawClient(cluster.nodes[node].bootstrap, timeout=30) as c:
        c.send_frame(c.encode(FETCH, version, request))
        frame = c.recv_frame()
    flexible = version >= 12  # a response header with tagged fields
    result = entity_reader(response_class(FETCH, version))(memoryview(frame), 5 if flexible else 4)
    entity = result[0] if isinstance(result, tuple) else result
    return entity.responses[0].partitions[0]


def _check_fetch_protocol(cluster: TidelakeCluster, topic: str, leaders: dict[int, int]) -> None:
    """What a rack-aware Fetch gets from the leader, its preferred replica and
    the others; what a Fetch without a rack or below v11 gets from a non-leader."""
    q, leader = next((q, n) for q, n in leaders.items() if RACKS[n] == "a")
    replica = preferred_read_replica(topic, q, "b", leader, ENDPOINTS)
    assert replica is not None and RACKS[replica] == "b"
    other = next(n for n, r in RACKS.items() if r == "b" and n != replica)
    at_leader = _raw_fetch(cluster, leader, 12, topic, q, "b")
    assert (at_leader.error_code, at_leader.records) == (ErrorCode.none, b"")
    assert at_leader.preferred_read_replica == replica and at_leader.high_watermark > 0
    at_replica = _raw_fetch(cluster, replica, 12, topic, q, "b")
    assert at_replica.error_code == ErrorCode.none and at_replica.preferred_read_replica == -1
    assert at_replica.records and at_replica.high_watermark > 0
    at_other = _raw_fetch(cluster, other, 12, topic, q, "b")
    assert (at_other.records, at_other.preferred_read_replica) == (b"", replica)
    same_rack = _raw_fetch(cluster, leader, 12, topic, q, "a")  # the leader is in rack a
    assert same_rack.preferred_read_replica == -1 and same_rack.records
    for version, rack in ((12, ""), (10, "b")):
        plain = _raw_fetch(cluster, replica, version, topic, q, rack)
        assert plain.error_code == ErrorCode.not_leader_or_follower, (version, rack)


def _check_exactly_once_in_order(reader: _Reader, sent: dict[int, list[bytes]]) -> None:
    for q in range(PARTITIONS):
        offsets = [o for o, _ in reader.got[q]]
        assert offsets == list(range(len(offsets))), f"partition {q}: offsets {offsets[:20]}"
        assert [v for _, v in reader.got[q]] == sent[q], f"partition {q} differs"


def test_consumers_read_from_their_own_rack_and_survive_their_replica_dying(
    tmp_path: Path, s3_endpoint: str
) -> None:
    with _rack_cluster(tmp_path, s3_endpoint) as cluster:
        topic = "racks"
        admin = _admin(cluster.bootstrap)
        _create(admin, topic, PARTITIONS)
        leaders = _leaders(admin, topic, PARTITIONS)
        assert {RACKS[n] for n in leaders.values()} == {"a", "b"}, leaders
        readers = [_Reader(cluster.bootstrap, topic, rack) for rack in ("a", "b")]
        for r in readers:
            r.start()
        try:
            sent = _produce(cluster.bootstrap, topic, 0, 150)
            _wait_for(readers, 150 * PARTITIONS, 60)
            time.sleep(1)  # nothing more arrives
            for r in readers:
                assert not r.errors, r.errors[:5]
                _check_exactly_once_in_order(r, sent)
            payload = sum(len(v) for vs in sent.values() for v in vs)
            traffic = _rack_bytes(cluster)
            fetched = sum(n for (_, _, d), n in traffic.items() if d == "fetch")
            cross = sum(n for (b, c, d), n in traffic.items() if d == "fetch" and b != c)
            assert fetched >= 2 * payload, traffic  # record batches: a little over the values
            assert cross <= 0.05 * fetched, (cross, fetched, traffic)
            produced = sum(n for (_, c, d), n in traffic.items() if d == "produce" and c == "a")
            assert produced >= payload, traffic  # the producer's client.id rack is counted
            _check_fetch_protocol(cluster, topic, _leaders(admin, topic, PARTITIONS))

            # kill -9 the rack-b broker that serves rack-b consumers a partition
            # led in rack a: they go back to the leader and miss nothing
            served = {
                q: preferred_read_replica(topic, q, "b", leader, ENDPOINTS)
                for q, leader in _leaders(admin, topic, PARTITIONS).items()
            }
            victim = next(n for n in served.values() if n is not None)
            cluster.nodes[victim].kill()
            more = _produce(cluster.live()[0].bootstrap, topic, 150, 100)
            for q in range(PARTITIONS):
                sent[q] += more[q]
            _wait_for(readers, 250 * PARTITIONS, 90)
            time.sleep(1)
            for r in readers:
                _check_exactly_once_in_order(r, sent)
        finally:
            for r in readers:
                r.stop.set()
            for r in readers:
                r.join(10)


def test_read_committed_consumers_in_another_rack_never_see_aborted_records(
    tmp_path: Path, s3_endpoint: str
) -> None:
    """A replica cannot filter transactions: read_committed consumers get the
    transactional part from the leader and the rest from their rack's broker;
    read_uncommitted ones get every record from the replica."""
    with _rack_cluster(tmp_path, s3_endpoint) as cluster:
        topic = "racks-txn"
        admin = _admin(cluster.bootstrap)
        _create(admin, topic, PARTITIONS)
        leaders = _leaders(admin, topic, PARTITIONS)
        readers = [
            _Reader(cluster.bootstrap, topic, "b"),
            _Reader(cluster.bootstrap, topic, "a"),
            _Reader(cluster.bootstrap, topic, "b", "read_uncommitted"),
        ]
        for r in readers:
            r.start()
        try:
            committed = _produce(cluster.bootstrap, topic, 0, 20)
            all_records = {q: list(v) for q, v in committed.items()}
            tp = Producer(
                quiet({"bootstrap.servers": cluster.bootstrap, "transactional.id": unique("tx")})
            )
            tp.init_transactions(30)
            for n, commit in ((0, True), (1, False), (2, True)):
                tp.begin_transaction()
                for i in range(10):
                    for q in range(PARTITIONS):
                        value = b"%d:txn%d-%d" % (q, n, i)
                        tp.produce(topic, value=value, partition=q)
                        all_records[q].append(value)
                        if commit:
                            committed[q].append(value)
                assert tp.flush(30) == 0  # abort purges what is not sent yet
                if commit:
                    tp.commit_transaction(30)
                else:
                    tp.abort_transaction(30)
            tail = _produce(cluster.bootstrap, topic, 20, 20)
            for q in range(PARTITIONS):
                committed[q] += tail[q]
                all_records[q] += tail[q]
            want_committed = sum(len(v) for v in committed.values())
            _wait_for(readers[:2], want_committed, 60)
            _wait_for(readers[2:], sum(len(v) for v in all_records.values()), 60)
            time.sleep(1)
            for r in readers[:2]:
                for q in range(PARTITIONS):
                    got = [v for _, v in r.got[q]]
                    assert got == committed[q], f"partition {q} (leader {leaders[q]})"
            for q in range(PARTITIONS):
                assert [v for _, v in readers[2].got[q]] == all_records[q]
            assert _rack_bytes(cluster)[("b", "b", "fetch")] > 0
        finally:
            for r in readers:
                r.stop.set()
            for r in readers:
                r.join(10)
