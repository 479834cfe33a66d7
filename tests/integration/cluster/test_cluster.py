"""A cluster of real broker processes on PostgreSQL and moto's S3 server.

Driven by confluent-kafka as a user would: metadata shows every broker and
spreads leaders, brokers that do not lead a partition send clients to the
one that does, and a broker killed with kill -9 loses nothing an idempotent
acks=all producer was told was written.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ingest.protocol.records import build_batch
from tests.integration.broker.conftest import RECENT_TS, quiet
from tests.integration.broker.rawkafka import RawClient
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    """Three brokers for the tests that change no broker (each uses its own topics)."""
    with running_cluster(tmp_path_factory.mktemp("shared"), s3_endpoint, nodes=3) as c:
        yield c


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(quiet({"bootstrap.servers": bootstrap}))


def _create(admin: AdminClient, name: str, partitions: int) -> None:
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futs[name].result(timeout=30)


def _leaders(admin: AdminClient, topic: str, want: int, timeout: float = 30) -> dict[int, int]:
    """partition -> leader, once every one of ``want`` partitions has a leader."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == want:
            leaders = {p: t.partitions[p].leader for p in t.partitions}
            if all(leader >= 0 for leader in leaders.values()):
                return leaders
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions of {topic} have no leaders: {md.topics.get(topic)}")
        time.sleep(0.2)


def test_metadata_lists_every_broker_and_spreads_leaders(shared: TidelakeCluster) -> None:
    cluster = shared
    first = cluster.nodes[1]
    admin = _admin(first.bootstrap)
    md = admin.list_topics(timeout=10)
    assert {b.id: b.port for b in md.brokers.values()} == {
        n: p.kafka_port for n, p in cluster.nodes.items()
    }
    assert md.controller_id in cluster.nodes
    _create(admin, "spread", 6)
    leaders = _leaders(admin, "spread", 6)
    assert Counter(leaders.values()) == {1: 2, 2: 2, 3: 2}
    # every broker tells the same story
    for proc in cluster.nodes.values():
        assert _leaders(_admin(proc.bootstrap), "spread", 6) == leaders


def test_a_broker_that_does_not_lead_a_partition_answers_not_leader(
    shared: TidelakeCluster,
) -> None:
    cluster = shared
    admin = _admin(cluster.bootstrap)
    _create(admin, "routed", 3)
    leaders = _leaders(admin, "routed", 3)
    partition, leader = next(iter(leaders.items()))
    other = next(p for n, p in cluster.nodes.items() if n != leader)
    batch = build_batch([(b"k", b"v", [], RECENT_TS)])
    request = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {"name": "routed", "partition_data": [{"index": partition, "records": batch}]}
        ],
    }
    assert _produce_once_known(other.bootstrap, request) == NOT_LEADER_OR_FOLLOWER
    assert _produce_once_known(cluster.nodes[leader].bootstrap, request) == 0


def _produce_once_known(bootstrap: str, request: dict[str, Any]) -> int:
    """The partition's error code from the broker at ``bootstrap`` once it
    knows the topic: a topic created through one broker reaches the others
    moments later, and until then they answer UNKNOWN_TOPIC_OR_PARTITION, a
    retriable error, as Kafka's brokers do (a client retries it)."""
    deadline = time.monotonic() + 15
    while True:
        with RawClient(bootstrap) as c:
            code = int(c.request(0, 8, request).responses[0].partition_responses[0].error_code)
        if code != UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


class _Load:
    """An idempotent acks=all producer writing numbered messages round-robin
    over the partitions until stopped; remembers what was acknowledged when."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.producer = Producer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 60_000,
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )
        )
        # seq -> (partition, ack time); written by the producer thread's
        # delivery callbacks, so readers take a copy under the lock while the
        # load runs (iterating the live dict raises when an ack lands)
        self.acked: dict[int, tuple[int, float]] = {}
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        with self._lock:
            self.acked[int(msg.value())] = (msg.partition(), time.monotonic())

    def acks(self) -> list[tuple[int, float]]:
        """The (partition, ack time) of every ack so far, safe to call while
        the load runs."""
        with self._lock:
            return list(self.acked.values())

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    value=str(seq).encode(),
                    partition=seq % self.partitions,
                    on_delivery=self._on_delivery,
                )
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(60)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)


def test_kafka_python_follows_leaders_across_brokers(shared: TidelakeCluster) -> None:
    cluster = shared
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    admin = _admin(cluster.bootstrap)
    _create(admin, "kp", 3)
    _leaders(admin, "kp", 3)
    producer = KafkaProducer(bootstrap_servers=cluster.nodes[1].bootstrap, acks="all")
    try:
        for i in range(30):
            producer.send("kp", value=b"%d" % i, partition=i % 3).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.nodes[2].bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        consumer.assign([TopicPartition("kp", i) for i in range(3)])
        got = sorted(int(m.value) for m in consumer)
    finally:
        consumer.close()
    assert got == list(range(30))


def test_topic_changes_through_one_broker_reach_the_others(shared: TidelakeCluster) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    one, two, three = (_admin(shared.nodes[n].bootstrap) for n in (1, 2, 3))
    _create(one, "changing", 3)
    _leaders(three, "changing", 3)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "changing",
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    two.incremental_alter_configs([resource])[resource].result(timeout=30)
    deadline = time.monotonic() + 15
    while True:
        described = three.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "changing")])
        [entries] = [f.result(timeout=30) for f in described.values()]
        if entries["retention.ms"].value == "3600000":
            break
        assert time.monotonic() < deadline, entries["retention.ms"].value
        time.sleep(0.5)
    one.delete_topics(["changing"])["changing"].result(timeout=30)
    deadline = time.monotonic() + 15
    while "changing" in three.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "broker 3 still lists a deleted topic"
        time.sleep(0.3)
