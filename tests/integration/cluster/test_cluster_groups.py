"""Consumer groups in a cluster: one coordinator per group, and when that
broker dies, the group's members find the next one, rejoin and go on from
the committed offsets (which live in the shared metadata store)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.integration.broker.conftest import quiet
from tests.integration.broker.rawkafka import RawClient
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster

NOT_COORDINATOR = 16


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    with running_cluster(tmp_path, s3_endpoint, nodes=3) as c:
        yield c


def _coordinator(bootstrap: str, group: str) -> int:
    with RawClient(bootstrap.split(",")[0]) as c:
        resp = c.request(10, 1, {"key": group, "key_type": 0})
    assert resp.error_code == 0, resp
    return int(resp.node_id)


def _produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}))
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=v % 3)
    assert p.flush(60) == 0


def _commit(c: Consumer, timeout: float = 60) -> None:
    """Commit the consumer's positions, retrying what a moving coordinator makes
    retriable (a rejoin in progress), as an application would."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.commit(asynchronous=False)
            return
        except KafkaException as exc:
            if (
                time.monotonic() > deadline
                or not exc.args[0].retriable()
                and exc.args[0].code()
                not in (
                    KafkaError.REBALANCE_IN_PROGRESS,
                    KafkaError.UNKNOWN_MEMBER_ID,
                    KafkaError.ILLEGAL_GENERATION,
                    KafkaError.NOT_COORDINATOR,
                    KafkaError._NO_OFFSET,
                )
            ):
                raise
        c.poll(0.5)  # lets the consumer rejoin


def _consume(c: Consumer, want: set[int], timeout: float) -> set[int]:
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while not want <= seen and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen.add(int(m.value()))
    return seen


def test_every_broker_names_the_same_coordinator_and_the_others_refuse_the_group(
    cluster: TidelakeCluster,
) -> None:
    named = {_coordinator(p.bootstrap, "orders-app") for p in cluster.nodes.values()}
    assert len(named) == 1
    [coordinator] = named
    other = next(p for n, p in cluster.nodes.items() if n != coordinator)
    heartbeat = {"group_id": "orders-app", "generation_id": 1, "member_id": "m"}
    with RawClient(other.bootstrap) as c:
        assert c.request(12, 1, heartbeat).error_code == NOT_COORDINATOR


def test_the_group_survives_its_coordinators_kill_9_with_its_offsets(
    cluster: TidelakeCluster,
) -> None:
    topic, group = "grouped", "survivors"
    admin = _admin(cluster.bootstrap)
    _create(admin, topic, 3)
    _leaders(admin, topic, 3)
    _produce(cluster.bootstrap, topic, range(0, 90))
    consumer = Consumer(
        quiet(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
    )
    try:
        consumer.subscribe([topic])
        first = _consume(consumer, set(range(90)), 60)
        assert first == set(range(90))
        _commit(consumer)
        coordinator = _coordinator(cluster.bootstrap, group)
        cluster.nodes[coordinator].kill()
        live = cluster.bootstrap
        _produce(live, topic, range(90, 150))
        # the same member goes on: it finds the new coordinator and rejoins
        after = _consume(consumer, set(range(90, 150)), 90)
        assert after >= set(range(90, 150))
        assert not after & set(range(90)), "records before the committed offsets came again"
        # commit up to the end (a rejoin may hand the records back once more)
        deadline = time.monotonic() + 60
        while True:
            _commit(consumer)
            done = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
            if sorted(tp.offset for tp in done) == [50, 50, 50]:
                break
            assert time.monotonic() < deadline, done
            consumer.poll(0.5)
        # once the dead broker's lease ran out, the group has a live coordinator
        deadline = time.monotonic() + 30
        while _coordinator(live, group) == coordinator:
            assert time.monotonic() < deadline, "the dead broker still coordinates the group"
            time.sleep(0.3)
    finally:
        consumer.close()
    # a new member of the group, through another broker, starts at the commits
    check = Consumer(quiet({"bootstrap.servers": live, "group.id": group}))
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    finally:
        check.close()
    assert sorted(tp.offset for tp in committed) == [50, 50, 50]
