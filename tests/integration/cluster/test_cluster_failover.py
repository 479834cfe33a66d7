"""A cluster of real broker processes losing and gaining brokers: kill -9 of
a broker under an idempotent acks=all producer loses nothing, a joining
broker gets its share, SIGTERM drains one. Each test has three brokers of its
own; this module is apart from test_cluster.py so that its clusters never run
next to that module's shared one (each broker holds about twenty PostgreSQL
connections, and the server allows a hundred)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.broker.conftest import consume_range, quiet
from tests.integration.cluster.test_cluster import _admin, _create, _leaders, _Load
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    """Three brokers of its own, for a test that kills, adds or stops one."""
    with running_cluster(tmp_path, s3_endpoint, nodes=3) as c:
        yield c


def test_kill_9_of_a_broker_moves_its_partitions_and_loses_nothing(
    cluster: TidelakeCluster,
) -> None:
    topic, partitions = "failover", 6
    admin = _admin(cluster.bootstrap)
    _create(admin, topic, partitions)
    leaders = _leaders(admin, topic, partitions)
    victim = leaders[0]
    moved = {p for p, n in leaders.items() if n == victim}
    with _Load(cluster.bootstrap, topic, partitions) as load:
        time.sleep(3)
        before = len(load.acks())
        killed_at = time.monotonic()
        cluster.nodes[victim].kill()
        deadline = killed_at + 30
        while time.monotonic() < deadline:
            recovered = {p for p, t in load.acks() if t > killed_at + 0.5}
            if moved <= recovered:
                break
            time.sleep(0.2)
        time.sleep(1)
    assert before > 0
    assert not load.failed, load.failed[:5]
    first_ack = {
        p: min(t for q, t in load.acked.values() if q == p and t > killed_at + 0.5) for p in moved
    }
    failover_s = max(first_ack.values()) - killed_at
    assert failover_s < 10, f"acks resumed on every moved partition after {failover_s:.1f} s"
    new_leaders = _leaders(_admin(cluster.bootstrap), topic, partitions)
    assert victim not in new_leaders.values()
    # every acknowledged message is there, exactly once
    messages = consume_range(cluster.bootstrap, topic, range(partitions), len(load.acked), 60)
    values = Counter(int(m.value()) for m in messages)
    assert set(load.acked) <= set(values), sorted(set(load.acked) - set(values))[:10]
    assert max(values.values()) == 1, [v for v, n in values.items() if n > 1][:10]
    for m in messages:
        assert load.acked.get(int(m.value()), (m.partition(), 0))[0] == m.partition()


def test_a_joining_broker_gets_a_fair_share_and_sigterm_drains_one(
    cluster: TidelakeCluster,
) -> None:
    admin = _admin(cluster.bootstrap)
    _create(admin, "joined", 8)
    _leaders(admin, "joined", 8)
    cluster.start_node(4)
    deadline = time.monotonic() + 60
    while True:
        leaders = _leaders(admin, "joined", 8)
        counts = Counter(leaders.values())
        if counts.get(4, 0) >= 2:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"node 4 got no fair share: {counts}")
        time.sleep(0.5)
    assert max(counts.values()) - min(counts[n] for n in (1, 2, 3, 4)) <= 1
    # the moved partitions still take writes and keep their data
    p = Producer(quiet({"bootstrap.servers": cluster.bootstrap, "acks": "all"}))
    for i in range(8):
        p.produce("joined", value=b"after-%d" % i, partition=i)
    assert p.flush(30) == 0
    got = consume_range(cluster.bootstrap, "joined", range(8), 8, 30)
    assert sorted(m.value() for m in got) == sorted(b"after-%d" % i for i in range(8))
    # SIGTERM: the broker hands its partitions over before it exits
    _create(admin, "drained", 6)
    p = Producer(quiet({"bootstrap.servers": cluster.bootstrap, "acks": "all"}))
    for i in range(60):
        p.produce("drained", value=b"%d" % i, partition=i % 6)
    assert p.flush(30) == 0
    leaders = _leaders(admin, "drained", 6)
    leaving = leaders[0]
    assert cluster.nodes[leaving].stop() == 0
    rest = _admin(cluster.bootstrap)
    deadline = time.monotonic() + 15
    while leaving in (after := _leaders(rest, "drained", 6)).values():
        assert time.monotonic() < deadline, f"node {leaving} still leads after it left: {after}"
        time.sleep(0.3)
    got = consume_range(cluster.bootstrap, "drained", range(6), 60, 30)
    assert sorted(int(m.value()) for m in got) == list(range(60))
