"""Transactions across a kill -9 of the broker: nothing committed is lost,
nothing open is left hanging, and a consume-transform-produce pipeline stays
exactly-once."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.broker.conftest import create_topic, quiet, unique
from tests.integration.broker.test_transactions import (
    ENV,
    _assert_exactly_once,
    _fill,
    _pipeline,
    producer,
    read_all,
)
from tests.support.platform import TidelakeProcess


def test_after_a_kill_committed_transactions_stay_and_an_open_one_is_aborted(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=ENV).start()
    restarted: TidelakeProcess | None = None
    try:
        bs = broker.bootstrap
        topic = unique("crash-txn")
        create_topic(bs, topic, partitions=2)
        tid = unique("tid")
        tx = producer(bs, tid)
        tx.begin_transaction()
        for i in range(20):
            tx.produce(topic, value=b"committed-%d" % i, partition=i % 2)
        tx.commit_transaction(10)
        tx.begin_transaction()
        for i in range(20):
            tx.produce(topic, value=b"open-%d" % i, partition=i % 2)
        tx.flush(10)  # acknowledged, never committed
        broker.kill()
        restarted = TidelakeProcess(data, env=ENV, kafka_port=broker.kafka_port).start()
        # the open transaction still holds readers of committed data back ...
        before = read_all(bs, topic, 2, "read_committed")
        assert sorted(v for vs in before.values() for v in vs) == sorted(
            b"committed-%d" % i for i in range(20)
        )
        # ... until a new producer of the id takes over and aborts it
        fresh = producer(bs, tid)
        fresh.begin_transaction()
        fresh.produce(topic, value=b"after", partition=0)
        fresh.commit_transaction(10)
        got = read_all(bs, topic, 2, "read_committed")
        assert got[0] == [b"committed-%d" % i for i in range(0, 20, 2)] + [b"after"]
        assert got[1] == [b"committed-%d" % i for i in range(1, 20, 2)]
        uncommitted = read_all(bs, topic, 2, "read_uncommitted")
        assert sum(len(v) for v in uncommitted.values()) == 20 + 20 + 1
    finally:
        broker.kill()
        if restarted is not None:
            restarted.stop()


def test_an_open_transaction_found_after_a_restart_times_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=ENV).start()
    restarted: TidelakeProcess | None = None
    try:
        bs = broker.bootstrap
        topic = unique("crash-timeout")
        create_topic(bs, topic, partitions=1)
        tx = producer(bs, unique("tid"), **{"transaction.timeout.ms": 2000})
        tx.begin_transaction()
        tx.produce(topic, value=b"orphan", partition=0)
        tx.flush(10)
        broker.kill()
        restarted = TidelakeProcess(data, env=ENV, kafka_port=broker.kafka_port).start()
        plain = Producer(quiet({"bootstrap.servers": bs}))
        plain.produce(topic, value=b"plain", partition=0)
        plain.flush(10)
        deadline = time.monotonic() + 15
        while True:
            got = read_all(bs, topic, 1, "read_committed")
            if got[0]:
                break
            assert time.monotonic() < deadline, "the orphaned transaction still holds the LSO"
            time.sleep(0.2)
        assert got == {0: [b"plain"]}
    finally:
        broker.kill()
        if restarted is not None:
            restarted.stop()


def test_consume_transform_produce_is_exactly_once_across_a_broker_kill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=ENV).start()
    restarted: TidelakeProcess | None = None
    try:
        bs = broker.bootstrap
        source, sink = unique("ctp-in"), unique("ctp-out")
        create_topic(bs, source, partitions=2)
        create_topic(bs, sink, partitions=2)
        count = 600
        _fill(bs, source, count, 2)
        group, tid = unique("ctp-group"), unique("ctp-tid")
        proc = _pipeline(bs, source, sink, group, tid)
        time.sleep(3)
        broker.kill()
        restarted = TidelakeProcess(data, env=ENV, kafka_port=broker.kafka_port).start()
        for _ in range(4):  # a fenced or failed pipeline is started again
            out, _ = proc.communicate(timeout=150)
            if proc.returncode == 0:
                break
            proc = _pipeline(bs, source, sink, group, tid)
        assert proc.returncode == 0, out.decode()
        _assert_exactly_once(bs, sink, count, 2)
    finally:
        broker.kill()
        if restarted is not None:
            restarted.stop()
