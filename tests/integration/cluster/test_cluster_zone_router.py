"""Rack-routed produce (issue #16, zero cross-AZ produce) with real broker
processes: four brokers in two racks (a: 1, 2; b: 3, 4) on PostgreSQL and
moto. A producer in rack a sends each partition's batches to the broker of
its rack that :func:`ingest.zone_router.routed_leader` names (what Metadata
names to a rack-tagged client; the test's raw-protocol producer,
tests/support/routed_producer.py, reads the real leaders and picks it
itself, so the test can tell routed partitions from led ones). For partitions
led in rack b that broker is not the leader and routes the batches through
object storage. Idempotent acks=all: every acknowledged batch is in its
partition exactly once, in order, at the offset the producer was told (read
back with confluent-kafka); kill -9 of a proxy and then of a leader give the
producer only retriable errors, and nothing acknowledged is lost. A real
client, kafka-python, that only sets ``tidelake_rack=a`` in its client.id,
is routed by the brokers' Metadata and produces through its rack's brokers with several requests in flight, each mixing partitions the broker
leads with partitions it routes: nothing lost, order kept, and the rack-b
brokers count no produce payload from rack a.

Brokers of its own, apart from test_cluster.py's shared cluster."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest
from kafka import KafkaProducer

from ingest.protocol.errors import ErrorCode
from tests.integration.broker.conftest import consume_range, unique
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.cluster.test_cluster_racks import _rack_bytes
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster
from tests.support.postgres import temporary_database
from tests.support.routed_producer import RoutedProducer, Sent

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}
PARTITIONS = 6


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _s3(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@contextmanager
def _rack_cluster(root: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    _s3(s3_endpoint).create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
    with temporary_database("tl_zone_router") as url:
        cluster = TidelakeCluster(root, url, s3_endpoint)
        try:
            for node, rack in RACKS.items():
                cluster.start_node(node, TIDELAKE_BROKER_RACK=rack)
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    with _rack_cluster(tmp_path, s3_endpoint) as c:
        yield c


def _producer(cluster: TidelakeCluster, topic: str, rack: str | None) -> RoutedProducer:
    hosts = [(h, int(p)) for h, p in (b.rsplit(":", 1) for b in cluster.bootstrap.split(","))]
    producer = RoutedProducer(hosts, topic, rack)
    producer.start()
    deadline = time.monotonic() + 30
    while min(producer.leader(p) for p in range(PARTITIONS)) < 0:
        assert time.monotonic() < deadline, "partitions without a leader"
        time.sleep(0.2)
        producer.refresh()
    return producer


def _router_objects(cluster: TidelakeCluster, s3_endpoint: str) -> list[str]:
    s3 = _s3(s3_endpoint)
    out = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{cluster.prefix}/router/")  # type: ignore[attr-defined]
    return [o["Key"] for o in out.get("Contents", [])]


def _check_read_back(cluster: TidelakeCluster, topic: str, sent: list[Sent]) -> None:
    """Every acknowledged batch, exactly once, in order, at its offset."""
    want: dict[tuple[int, int], bytes] = {}
    for s in sent:
        for i, v in enumerate(s.values):
            want[(s.partition, s.offset + i)] = v
    messages = consume_range(cluster.bootstrap, topic, range(PARTITIONS), len(want), 60)
    got: dict[tuple[int, int], bytes] = {}
    for m in messages:
        key = (m.partition() or 0, m.offset() or 0)
        assert key not in got, f"offset {key} read twice"
        got[key] = m.value() or b""
    assert got == want  # nothing lost, nothing duplicated, each at its told offset
    for p in range(PARTITIONS):
        values = [v for (q, _), v in sorted(got.items()) if q == p]
        assert values == [v for s in sent if s.partition == p for v in s.values]  # producer order


def test_routed_produce_lands_once_in_order_at_the_offsets_the_producer_was_told(
    cluster: TidelakeCluster, s3_endpoint: str
) -> None:
    topic = unique("zone-routed")
    _create(_admin(cluster.bootstrap), topic, PARTITIONS)
    _leaders(_admin(cluster.bootstrap), topic, PARTITIONS)
    producer = _producer(cluster, topic, "a")
    try:
        routed = {p for p in range(PARTITIONS) if RACKS[producer.leader(p)] == "b"}
        direct = set(range(PARTITIONS)) - routed
        assert routed, "no partition is led in rack b"
        sent: list[Sent] = []
        for i in range(20):
            for p in range(PARTITIONS):
                sent.append(producer.send(p, [f"{p}-{i}-{j}".encode() for j in range(3)]))
        # Only the first batch of a partition may have met the cluster still
        # settling its new partitions (retriable errors, retried).
        assert [s.retries for s in sent[PARTITIONS:]] == [0] * (len(sent) - PARTITIONS), (
            producer.errors
        )
        for s in sent:
            assert RACKS[s.via] == "a"  # the producer never spoke to rack b
            if s.partition in routed:
                assert s.via != producer.leader(s.partition)
        for p in range(PARTITIONS):
            assert [s.offset for s in sent if s.partition == p] == list(range(0, 60, 3))
        assert direct | routed == set(range(PARTITIONS))

        # Ten requests for one routed partition back to back on one connection:
        # the proxy keeps them in order (the leader checks their sequences).
        p = min(routed)
        pipelined = producer.send_pipelined(p, [[f"{p}-pipe-{i}".encode()] for i in range(10)])
        assert [s.offset for s in pipelined] == list(range(60, 70))
        sent += pipelined

        # The payload crossed no rack: rack-b brokers got no produce bytes
        # from rack-a clients (the routed ones came to them from S3).
        rack_bytes = _rack_bytes(cluster)
        assert rack_bytes.get(("b", "a", "produce"), 0) == 0
        payload = sum(len(v) for s in sent for v in s.values)
        assert rack_bytes.get(("a", "a", "produce"), 0) >= payload

        # Clients that announce no rack, or another rack, get Kafka's answer.
        proxy = next(s.via for s in sent if s.partition in routed)
        p = next(s.partition for s in sent if s.via == proxy and s.partition in routed)
        for rack in (None, "b"):
            other = _producer(cluster, topic, rack)
            try:
                resp = other._call(proxy, 0, 9, other._produce(p, b"\0" * 70))
                code = resp.responses[0].partition_responses[0].error_code
                assert code == ErrorCode.not_leader_or_follower
            finally:
                other.close()
    finally:
        producer.close()
    _check_read_back(cluster, topic, sent)
    deadline = time.monotonic() + 10
    while _router_objects(cluster, s3_endpoint) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _router_objects(cluster, s3_endpoint) == []  # deleted once the leaders answered


def test_killing_the_proxy_then_the_leader_gives_only_retriable_errors_and_loses_nothing(
    cluster: TidelakeCluster,
) -> None:
    topic = unique("zone-killed")
    _create(_admin(cluster.bootstrap), topic, PARTITIONS)
    _leaders(_admin(cluster.bootstrap), topic, PARTITIONS)
    producer = _producer(cluster, topic, "a")
    routed = [p for p in range(PARTITIONS) if RACKS[producer.leader(p)] == "b"]
    assert routed, "no partition is led in rack b"
    proxy = producer.target(routed[0])
    leader = producer.leader(routed[0])
    sent: list[Sent] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def run() -> None:
        i = 0
        try:
            while not stop.is_set():
                for p in range(PARTITIONS):
                    sent.append(producer.send(p, [f"{p}-{i}-{j}".encode() for j in range(2)]))
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        time.sleep(2)
        before_kill = len(sent)
        cluster.nodes[proxy].kill()
        time.sleep(4)
        cluster.nodes[leader].kill()
        time.sleep(8)
    finally:
        stop.set()
        thread.join(90)
        producer.close()
    assert not failures, failures
    assert before_kill > 0
    assert producer.errors, "the kills were never noticed"
    acked_after = {s.partition for s in sent[before_kill:]}
    assert set(routed) <= acked_after  # routed partitions recovered after the kills
    live = {n for n, proc in cluster.nodes.items() if proc.proc and proc.proc.poll() is None}
    assert live == set(RACKS) - {proxy, leader}
    _check_read_back(cluster, topic, sent)


KP_CLIENT_ID = "kp-orders;tidelake_rack=a"


def test_kafka_python_producing_through_its_racks_brokers_loses_nothing_and_crosses_no_rack(
    cluster: TidelakeCluster,
) -> None:
    """A real client's Produce requests, each mixing partitions the broker
    leads with partitions it routes, several in flight per connection; the
    client only sets its client.id: the brokers' Metadata routes it."""
    topic = unique("zone-kp")
    _create(_admin(cluster.bootstrap), topic, PARTITIONS)
    leaders = _leaders(_admin(cluster.bootstrap), topic, PARTITIONS)
    assert {RACKS[n] for n in leaders.values()} == {"a", "b"}, leaders
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap.split(","),
        client_id=KP_CLIENT_ID,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_in_flight_requests_per_connection=5,
    )
    try:
        futures = [
            (
                i % PARTITIONS,
                b"kp-%d" % i,
                producer.send(topic, b"kp-%d" % i, partition=i % PARTITIONS),
            )
            for i in range(3000)
        ]
        producer.flush(60)
        acked = [(p, v, f.get(timeout=30)) for p, v, f in futures]
    finally:
        producer.close(10)
    want = {(p, md.offset): v for p, v, md in acked}
    assert len(want) == len(acked)  # no two acks at one offset
    messages = consume_range(cluster.bootstrap, topic, range(PARTITIONS), len(want), 60)
    got = {(m.partition() or 0, m.offset() or 0): m.value() or b"" for m in messages}
    assert got == want
    for p in range(PARTITIONS):  # the client's order within each partition
        assert [v for (q, _), v in sorted(got.items()) if q == p] == [
            v for q, v, _ in acked if q == p
        ]
    rack_bytes = _rack_bytes(cluster)
    assert rack_bytes.get(("b", "a", "produce"), 0) == 0  # routed, not sent across
    assert rack_bytes.get(("a", "a", "produce"), 0) >= sum(len(v) for v in want.values())
