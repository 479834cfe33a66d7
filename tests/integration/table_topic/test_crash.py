"""Exactly once across crashes: kill -9 before, during and after a commit, restart, compare with the log.

The partition log is the truth (acknowledged records survive a crash); after
recovery the table must hold every record of the log exactly once: the same
count, no (partition, offset) twice, the same key set.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.support.platform import TidelakeProcess

TOPIC = "crashy"


def _produce_wave(tt: TableTopics, start: int, count: int, tolerate_errors: bool = False) -> None:
    p = tt.producer(**{"acks": "all", "message.timeout.ms": 8000})
    for i in range(start, start + count):
        try:
            p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
        except BufferError:
            p.poll(0.1)
        p.poll(0)
    left = p.flush(10)
    if not tolerate_errors:
        assert left == 0


def _log_contents(tt: TableTopics, partitions: int) -> set[tuple[int, int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": tt.proc.bootstrap,
            "group.id": f"crash-check-{time.time()}",
            "enable.auto.commit": False,
        }
    )
    out: set[tuple[int, int, bytes]] = set()
    try:
        ends = {}
        for p in range(partitions):
            _low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            ends[p] = high
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            sum(1 for q, _o, _k in out if q == p) < ends[p] for p in ends
        ):
            for m in c.consume(1000, 0.5):
                if not m.error():
                    out.add((m.partition(), m.offset(), m.key()))
    finally:
        c.close()
    return out


def _check_exactly_once(tt: TableTopics, expected: set[tuple[int, int, bytes]]) -> None:
    rows = tt.wait_rows(TOPIC, len(expected), timeout=60)
    time.sleep(2.5)  # two more intervals: nothing extra may arrive
    rows = tt.table(TOPIC).scan().to_arrow()
    got = list(
        zip(
            rows.column("_kafka_partition").to_pylist(),
            rows.column("_kafka_offset").to_pylist(),
            rows.column("_kafka_key").to_pylist(),
            strict=True,
        )
    )
    assert len(got) == len(set(got)), "a record was committed twice"
    assert len(got) == len(expected)
    assert set(got) == expected
    assert {k for _p, _o, k in got} == {k for _p, _o, k in expected}


@pytest.mark.parametrize("point", ["before_commit", "files_written", "after_commit"])
def test_fault_at_commit_point_then_restart_is_exactly_once(tmp_path: Path, point: str) -> None:
    env = {
        **TT_ENV,
        "TIDELAKE_TABLE_TOPIC_FAULT_POINT": point,
        "TIDELAKE_TABLE_TOPIC_FAULT_AFTER_COMMITS": "2",
    }
    proc = TidelakeProcess(tmp_path / "data", env=env).start()
    try:
        tt = TableTopics(proc)
        tt.create_topic(TOPIC, partitions=2, **{"table.topic.convert.key.type": "string"})
        n = 0
        deadline = time.monotonic() + 40
        while proc.proc is not None and proc.proc.poll() is None and time.monotonic() < deadline:
            _produce_wave(tt, n, 500, tolerate_errors=True)
            n += 500
            time.sleep(0.4)
        assert proc.proc is not None and proc.proc.returncode == 137, proc.log_tail()
        assert f"fault injection: exiting at {point}" in proc.log_tail(200)
        proc.kill()
        proc.extra_env = dict(TT_ENV)
        proc.start()
        _produce_wave(tt, n + 100_000, 700)
        expected = _log_contents(tt, 2)
        assert len(expected) >= 700
        _check_exactly_once(tt, expected)
    finally:
        proc.stop()


def test_kill_9_at_random_moments_while_producing(tmp_path: Path) -> None:
    proc = TidelakeProcess(tmp_path / "data", env=dict(TT_ENV)).start()
    try:
        tt = TableTopics(proc)
        tt.create_topic(TOPIC, partitions=3, **{"table.topic.convert.key.type": "string"})
        base = 0
        for delay in (1.7, 2.9):
            stop = threading.Event()

            def produce_until_stopped(start: int, stop: threading.Event) -> None:
                i = start
                while not stop.is_set():
                    _produce_wave(tt, i, 300, tolerate_errors=True)
                    i += 300

            t = threading.Thread(target=produce_until_stopped, args=(base, stop), daemon=True)
            t.start()
            time.sleep(delay)
            proc.kill()
            stop.set()
            t.join(30)
            base += 1_000_000
            proc.start()
        _produce_wave(tt, base, 500)
        expected = _log_contents(tt, 3)
        _check_exactly_once(tt, expected)
    finally:
        proc.stop()


def test_dead_letters_are_written_once_across_a_crash_before_commit(tmp_path: Path) -> None:
    env = {
        **TT_ENV,
        "TIDELAKE_TABLE_TOPIC_FAULT_POINT": "before_commit",
        "TIDELAKE_TABLE_TOPIC_FAULT_AFTER_COMMITS": "2",
    }
    proc = TidelakeProcess(tmp_path / "data", env=env).start()
    try:
        tt = TableTopics(proc)
        tt.create_topic(TOPIC, partitions=1, **{"table.topic.convert.value.type": "string"})
        n = 0
        deadline = time.monotonic() + 40
        while proc.proc is not None and proc.proc.poll() is None and time.monotonic() < deadline:
            batch = [
                (f"k{i}".encode(), b"\xff\xfe" if i % 10 == 0 else f"v{i}".encode())
                for i in range(n, n + 200)
            ]
            try:
                tt.produce(TOPIC, batch)
            except AssertionError:
                break
            n += 200
            time.sleep(0.4)
        assert proc.proc is not None and proc.proc.wait(30) == 137, proc.log_tail()
        proc.kill()
        proc.extra_env = dict(TT_ENV)
        proc.start()
        tt.produce(TOPIC, [(b"last", b"\xff"), (b"last2", b"ok")])
        log = _log_contents(tt, 1)
        bad = {
            k for _p, _o, k in log if k == b"last" or (k.startswith(b"k") and int(k[1:]) % 10 == 0)
        }
        rows = tt.wait_rows(TOPIC, len(log) - len(bad), timeout=60)
        from tests.integration.table_topic.test_avro import consume_all

        dead = consume_all(tt, f"{TOPIC}.dlq", len(bad))
        offsets = [int(dict(m.headers())["tidelake.source.offset"]) for m in dead]
        assert len(offsets) == len(set(offsets)), "a dead letter was written twice"
        assert {m.key() for m in dead} == bad
        assert rows.num_rows + len(dead) == len(log)
    finally:
        proc.stop()
