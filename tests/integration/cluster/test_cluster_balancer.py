"""Self-balancing by traffic with three real brokers, driven by confluent-kafka.

First an even load (a topic whose partitions are spread over the brokers)
runs for several balancer windows and nothing moves. Then a hot topic whose
partitions are all led by node 1 is produced to: within the window plus the
move time, node 1's bytes/s come back under the margin above the mean, the
idempotent acks=all producer sees no failed delivery and no fatal error,
and every acknowledged record is read back exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from tests.integration.broker.conftest import consume_range, quiet
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster

WINDOW_MS = 3_000
MARGIN = 0.2
VALUE = 1_000  # bytes per record
TIDELAKE = str(Path(sys.executable).with_name("tidelake"))


SETTINGS = {
    "TIDELAKE_CLUSTER_LOAD_REPORT_INTERVAL_MS": "1000",
    "TIDELAKE_CLUSTER_BALANCER_WINDOW_MS": str(WINDOW_MS),
    "TIDELAKE_CLUSTER_BALANCER_MARGIN": str(MARGIN),
    "TIDELAKE_CLUSTER_BALANCER_MIN_BYTES_PER_S": "20000",
    "TIDELAKE_CLUSTER_BALANCER_COOLDOWN_MS": "60000",
}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    settings = {
        "TIDELAKE_CLUSTER_LOAD_REPORT_INTERVAL_MS": "1000",
        "TIDELAKE_CLUSTER_BALANCER_WINDOW_MS": str(WINDOW_MS),
        "TIDELAKE_CLUSTER_BALANCER_MARGIN": str(MARGIN),
        "TIDELAKE_CLUSTER_BALANCER_MIN_BYTES_PER_S": "20000",
        "TIDELAKE_CLUSTER_BALANCER_COOLDOWN_MS": "60000",
    }
    with running_cluster(tmp_path, s3_endpoint, nodes=3, env=lambda _url: settings) as c:
        yield c


class _Load:
    """One idempotent acks=all producer sending ``rates[topic]`` records/s to
    each partition of each topic, paced by the clock; what was acknowledged
    and every error are kept."""

    def __init__(self, bootstrap: str) -> None:
        self.errors: list[KafkaError] = []
        self.failed: list[str] = []
        self.acked: dict[str, set[bytes]] = {}
        self.rates: dict[str, tuple[int, float]] = {}  # topic -> (partitions, records/s each)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "error_cb": self.errors.append,
                }
            )
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def set_rate(self, topic: str, partitions: int, per_partition: float) -> None:
        with self._lock:
            self.rates[topic] = (partitions, per_partition)
            self.acked.setdefault(topic, set())

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed.append(f"{msg.topic()}-{msg.partition()}: {err}")
        else:
            self.acked[str(msg.topic())].add(bytes(msg.value() or b""))

    def _run(self) -> None:
        sent: dict[tuple[str, int], int] = {}
        began: dict[str, float] = {}
        pad = b"x" * (VALUE - 40)
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                rates = dict(self.rates)
            for topic, (partitions, rate) in rates.items():
                start = began.setdefault(topic, now)
                due = int((now - start) * rate)
                for p in range(partitions):
                    n = sent.get((topic, p), 0)
                    while n < due:
                        value = b"%s-%d-%08d|" % (topic.encode(), p, n) + pad
                        try:
                            self._producer.produce(
                                topic, value, partition=p, on_delivery=self._delivered
                            )
                        except BufferError:
                            break
                        n += 1
                    sent[(topic, p)] = n
            self._producer.poll(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        left = self._producer.flush(60)
        assert left == 0, f"{left} records never acknowledged"


@pytest.fixture
def pair(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    with running_cluster(tmp_path, s3_endpoint, nodes=2, env=lambda _url: SETTINGS) as c:
        yield c


def _status(cluster: TidelakeCluster) -> list[dict[str, Any]]:
    out = []
    for proc in cluster.live():
        r = httpx.get(f"{proc.http_url}/api/v1/cluster", params={"sample_ms": 0}, timeout=10)
        r.raise_for_status()
        out.append(r.json())
    return out


def _loads(cluster: TidelakeCluster) -> dict[int, float]:
    """Bytes/s (produce + fetch) each broker last reported."""
    reports = _status(cluster)[0]["balancer"]["loads"]
    return {int(n): r["bytes_in_per_s"] + r["bytes_out_per_s"] for n, r in reports.items()} | {
        n: 0.0 for n in cluster.nodes if str(n) not in reports
    }


def _share(cluster: TidelakeCluster) -> float:
    """Node 1's bytes/s over the mean of the brokers."""
    loads = _loads(cluster)
    mean = sum(loads.values()) / len(loads)
    return loads[1] / mean if mean else 0.0


def _leaders(cluster: TidelakeCluster, topic: str) -> list[int]:
    return sorted(leader for leader, _ in _epochs(cluster, topic).values())


def _decisions(cluster: TidelakeCluster) -> list[dict[str, Any]]:
    return [d for s in _status(cluster) for d in s["balancer"]["decisions"]]


def _epochs(cluster: TidelakeCluster, topic: str) -> dict[int, tuple[int, int]]:
    return {
        p["partition"]: (p["leader"], p["leader_epoch"])
        for p in _status(cluster)[0]["partitions"]
        if p["topic"] == topic
    }


def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient(quiet({"bootstrap.servers": bootstrap}))
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futs[name].result(timeout=30)


def _wait(cluster: TidelakeCluster, what: str, check: Any, timeout: float) -> float:
    """Poll ``check()`` until true; the seconds it took."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(0.25)
    raise AssertionError(f"{what} not reached in {timeout:.0f} s (loads {_loads(cluster)})")


def test_a_skewed_load_is_spread_and_an_even_one_is_left_alone(cluster: TidelakeCluster) -> None:
    bootstrap = cluster.bootstrap
    _create(bootstrap, "even", 6)
    _wait(cluster, "even spread", lambda: _leaders(cluster, "even") == [1, 1, 2, 2, 3, 3], 30)
    load = _Load(bootstrap)
    load.set_rate("even", 6, 40)  # 6 x 40 kB/s, two partitions per broker
    load.start()
    try:
        # an even load over four windows: nothing moves
        _wait(
            cluster,
            "every broker reporting traffic",
            lambda: min(_loads(cluster).values()) > 20_000,
            30,
        )
        before = _epochs(cluster, "even")
        time.sleep(4 * WINDOW_MS / 1000)
        assert _epochs(cluster, "even") == before
        assert _decisions(cluster) == []

        # a hot topic, every partition led by node 1
        _create(bootstrap, "hot", 6)
        kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        try:
            kp.alter_partition_reassignments({TopicPartition("hot", p): [1] for p in range(6)})
        finally:
            kp.close()
        _wait(cluster, "hot led by node 1", lambda: _leaders(cluster, "hot") == [1] * 6, 30)
        load.set_rate("hot", 6, 150)  # 6 x 150 kB/s on node 1
        _wait(cluster, "node 1 reporting the hot traffic", lambda: _share(cluster) > 2, 30)
        _wait(
            cluster,
            "node 1 under the margin",
            lambda: _share(cluster) <= 1 + MARGIN,
            WINDOW_MS / 1000 + 45,
        )
        moved = {p: leader for p, (leader, _) in _epochs(cluster, "hot").items()}
        assert set(moved.values()) == {1, 2, 3}, moved
        decisions = _decisions(cluster)
        assert decisions and all(d["by"] == "traffic" and d["from"] == 1 for d in decisions)
        assert all(d["topic"] == "hot" for d in decisions), decisions
        assert "node 1 at" in decisions[0]["reason"] and "x the mean" in decisions[0]["reason"]
        # the even topic was never touched
        assert {p: leader for p, (leader, _) in _epochs(cluster, "even").items()} == {
            p: leader for p, (leader, _) in before.items()
        }
        scraped = [httpx.get(f"{p.http_url}/metrics", timeout=10).text for p in cluster.live()]
        assert any(
            f'tidelake_cluster_balancer_moves_total{{by="traffic"}} {float(len(decisions))}' in t
            for t in scraped
        ), [line for t in scraped for line in t.splitlines() if "balancer" in line]
        assert any(
            'tidelake_partition_produced_bytes_total{partition="0",topic="hot"}' in t
            for t in scraped
        ), [line for t in scraped for line in t.splitlines() if "produced_bytes" in line]
        https = [a for proc in cluster.live() for a in ("--http", proc.http_url)]
        table = subprocess.run(
            [TIDELAKE, "cluster", "status", *https, "--sample-ms", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert table.returncode == 0, table.stderr
        assert "recent balancing decisions:" in table.stdout
        assert "[traffic] node 1 at" in table.stdout, table.stdout
        assert "IN/S" in table.stdout and "OUT/S" in table.stdout
    finally:
        load.stop()

    assert load.failed == []
    assert not any(e.fatal() for e in load.errors), [str(e) for e in load.errors]
    for topic, partitions in (("even", 6), ("hot", 6)):
        acked = load.acked[topic]
        got = consume_range(bootstrap, topic, range(partitions), len(acked), timeout=120)
        values = [bytes(m.value() or b"") for m in got]
        assert len(values) == len(set(values)), f"{topic}: duplicates"
        assert set(values) == acked, (
            f"{topic}: {len(acked - set(values))} acknowledged records lost"
        )


def test_a_broker_added_to_a_loaded_cluster_takes_its_share_of_traffic(
    pair: TidelakeCluster,
) -> None:
    cluster = pair
    _create(cluster.bootstrap, "busy", 6)
    _wait(cluster, "busy spread", lambda: _leaders(cluster, "busy") == [1, 1, 1, 2, 2, 2], 30)
    load = _Load(cluster.bootstrap)
    load.set_rate("busy", 6, 60)  # 6 x 60 kB/s
    load.start()
    try:
        _wait(cluster, "both brokers reporting", lambda: min(_loads(cluster).values()) > 50_000, 30)
        cluster.start_node(3)
        joined = time.monotonic()

        def fair() -> bool:
            loads = _loads(cluster)
            mean = sum(loads.values()) / 3
            return (
                len(loads) == 3
                and loads[3] >= mean / (1 + MARGIN)
                and max(loads.values()) <= mean * (1 + MARGIN)
            )

        _wait(cluster, "node 3 taking its share", fair, 60)
        assert time.monotonic() - joined < 60
        assert 3 in _leaders(cluster, "busy")
    finally:
        load.stop()
    assert load.failed == []
    assert not any(e.fatal() for e in load.errors), [str(e) for e in load.errors]
    acked = load.acked["busy"]
    got = consume_range(cluster.bootstrap, "busy", range(6), len(acked), timeout=120)
    values = [bytes(m.value() or b"") for m in got]
    assert len(values) == len(set(values)) and set(values) == acked
