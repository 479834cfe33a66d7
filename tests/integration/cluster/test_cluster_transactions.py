"""Transactions on a cluster: a transaction spans partitions led by several
brokers (its coordinator writes markers to the others with WriteTxnMarkers),
offsets go to the group's coordinator, and when the transaction's
coordinator dies, the broker that takes its ids over (the records live in the
shared metadata store) ends what it left open."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker.conftest import quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.integration.broker.test_transactions import (
    _assert_exactly_once,
    _fill,
    _pipeline,
    read_all,
)
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import running_cluster

ENV = {"TIDELAKE_BROKER_TRANSACTION_ABORT_INTERVAL_MS": "200"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _txn_coordinator(bootstrap: str, tid: str) -> int:
    with RawClient(bootstrap.split(",")[0]) as c:
        resp = c.request(10, 1, {"key": tid, "key_type": 1})
    assert resp.error_code == 0, resp
    return int(resp.node_id)


def _producer(bootstrap: str, tid: str) -> Producer:
    p = Producer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": tid,
                "transaction.timeout.ms": 20_000,
            }
        )
    )
    p.init_transactions(60)
    return p


def test_transactions_span_brokers_and_pipelines_stay_exactly_once(
    tmp_path: Path, s3_endpoint: str
) -> None:
    with running_cluster(tmp_path, s3_endpoint, nodes=3, env=lambda _url: ENV) as cluster:
        bs = cluster.bootstrap
        admin = _admin(bs)
        topic = unique("ctx")
        _create(admin, topic, 6)
        leaders = _leaders(admin, topic, 6)
        assert len(set(leaders.values())) == 3, leaders
        tid = unique("tid")
        tx = _producer(bs, tid)
        tx.begin_transaction()
        for i in range(60):
            tx.produce(topic, value=b"c-%d" % i, partition=i % 6)
        tx.commit_transaction(30)
        tx.begin_transaction()
        for i in range(60):
            tx.produce(topic, value=b"a-%d" % i, partition=i % 6)
        tx.flush(30)
        tx.abort_transaction(30)
        got = read_all(bs, topic, 6, "read_committed", timeout=60)
        for p in range(6):
            assert got[p] == [b"c-%d" % i for i in range(p, 60, 6)]
        assert sum(len(v) for v in read_all(bs, topic, 6, "read_uncommitted").values()) == 120
        # consume-transform-produce: input, output and the group's offsets on
        # (most likely) three different coordinators and leaders
        source, sink = unique("ctx-in"), unique("ctx-out")
        _create(admin, source, 3)
        _create(admin, sink, 3)
        _leaders(admin, source, 3)
        _leaders(admin, sink, 3)
        _fill(bs, source, 300, 3)
        proc = _pipeline(bs, source, sink, unique("ctx-group"), unique("ctx-tid"))
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out.decode()
        _assert_exactly_once(bs, sink, 300, 3)


def test_the_next_coordinator_ends_what_a_dead_one_left_open(
    tmp_path: Path, s3_endpoint: str
) -> None:
    with running_cluster(tmp_path, s3_endpoint, nodes=3, env=lambda _url: ENV) as cluster:
        bs = cluster.bootstrap
        admin = _admin(bs)
        topic = unique("ctx-fail")
        _create(admin, topic, 3)
        _leaders(admin, topic, 3)
        tid = unique("tid")
        coordinator = _txn_coordinator(bs, tid)
        tx = _producer(bs, tid)
        tx.begin_transaction()
        for i in range(30):
            tx.produce(topic, value=b"kept-%d" % i, partition=i % 3)
        tx.commit_transaction(30)
        tx.begin_transaction()
        for i in range(30):
            tx.produce(topic, value=b"open-%d" % i, partition=i % 3)
        tx.flush(30)
        cluster.nodes[coordinator].kill()
        survivors = ",".join(p.bootstrap for p in cluster.live())
        deadline = time.monotonic() + 30
        while _txn_coordinator(survivors, tid) == coordinator:
            assert time.monotonic() < deadline, "the dead coordinator's ids did not move"
            time.sleep(0.3)
        _leaders(_admin(survivors), topic, 3, timeout=60)
        # a new producer of the id: its coordinator aborts the open
        # transaction in every partition, wherever they are led now
        fresh = _producer(survivors, tid)
        fresh.begin_transaction()
        fresh.produce(topic, value=b"after", partition=0)
        fresh.commit_transaction(30)
        got = read_all(survivors, topic, 3, "read_committed", timeout=60)
        assert sorted(v for vs in got.values() for v in vs) == sorted(
            [b"kept-%d" % i for i in range(30)] + [b"after"]
        )
        c = Consumer(quiet({"bootstrap.servers": survivors, "group.id": unique("w")}))
        try:
            for p in range(3):
                low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                assert high > 10  # the kept, the open and the markers are all there
        finally:
            c.close()
