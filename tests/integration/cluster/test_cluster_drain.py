"""SIGTERM drains a broker: a producer that follows Kafka's rules (on a
retriable error, refresh metadata and send to the leader it names) sees at
most one retriable error per partition while the broker hands its partitions
over, whichever broker it asks for metadata, and every acknowledged record is
there afterwards."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.protocol.records import build_batch
from tests.integration.broker.conftest import RECENT_TS, consume_range
from tests.integration.broker.rawkafka import RawClient
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[TidelakeCluster]:
    with running_cluster(tmp_path, s3_endpoint, nodes=3) as c:
        yield c


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


class _Follower:
    """Produces one record at a time to each partition's leader; on any error
    (an error code or a lost connection) refreshes metadata once and retries."""

    def __init__(
        self, cluster: TidelakeCluster, topic: str, partitions: list[int], leaving: int
    ) -> None:
        self.cluster = cluster
        self.leaving = leaving
        self.disagreements: list[tuple[dict[int, int], dict[int, int]]] = []
        self.topic = topic
        self.partitions = partitions
        self.ports = {n: p.kafka_port for n, p in cluster.nodes.items()}
        self.errors: Counter[int] = Counter()
        self.acked: dict[int, list[bytes]] = {p: [] for p in partitions}
        self.stop = threading.Event()
        self._clients: dict[int, RawClient] = {}
        self._leaders: dict[int, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _refresh(self) -> None:
        """Ask every broker that stays for Metadata, each over a connection of
        its own, and follow the first; any of them must name the leader (a
        client may ask any broker)."""
        answers = [self._metadata(node) for node in sorted(self.ports) if node != self.leaving]
        self._leaders = answers[0]
        for other in answers[1:]:
            if other != answers[0]:
                self.disagreements.append((answers[0], other))

    def _metadata(self, node: int) -> dict[int, int]:
        deadline = time.monotonic() + 30
        while True:
            with RawClient(f"127.0.0.1:{self.ports[node]}") as c:
                resp = c.request(3, 9, {"topics": [{"name": self.topic}]})
            parts = resp.topics[0].partitions
            leaders = {int(p.partition_index): int(p.leader_id) for p in parts}
            if all(leaders.get(p, -1) >= 0 for p in self.partitions):
                return {p: leaders[p] for p in self.partitions}
            assert time.monotonic() < deadline, leaders
            time.sleep(0.05)

    def _client(self, node: int) -> RawClient:
        if node not in self._clients:
            self._clients[node] = RawClient(f"127.0.0.1:{self.ports[node]}")
        return self._clients[node]

    def _send(self, partition: int, value: bytes) -> int:
        node = self._leaders[partition]
        request = {
            "transactional_id": None,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [
                {
                    "name": self.topic,
                    "partition_data": [
                        {"index": partition, "records": build_batch([(None, value, [], RECENT_TS)])}
                    ],
                }
            ],
        }
        try:
            resp = self._client(node).request(0, 8, request)
        except (OSError, ConnectionError):
            self._clients.pop(node, None)
            return -1
        return int(resp.responses[0].partition_responses[0].error_code)

    def _run(self) -> None:
        self._refresh()
        n = 0
        while not self.stop.is_set():
            for p in self.partitions:
                value = b"%d-%d" % (p, n)
                code = self._send(p, value)
                if code != 0:
                    self.errors[p] += 1
                    self._refresh()
                    code = self._send(p, value)
                    if code != 0:
                        self.errors[p] += 1
                        continue
                self.acked[p].append(value)
            n += 1
        for c in self._clients.values():
            c.close()


def test_a_draining_broker_costs_a_producer_at_most_one_error_per_partition(
    cluster: TidelakeCluster,
) -> None:
    topic = "drain-errors"
    admin = _admin(cluster.bootstrap)
    _create(admin, topic, 6)
    leaders = _leaders(admin, topic, 6)
    leaving = leaders[0]
    moved = sorted(p for p, n in leaders.items() if n == leaving)
    follower = _Follower(cluster, topic, moved, leaving)
    follower.thread.start()
    time.sleep(2)
    assert cluster.nodes[leaving].stop() == 0
    time.sleep(2)
    follower.stop.set()
    follower.thread.join(60)
    assert all(len(v) > 10 for v in follower.acked.values()), follower.acked
    assert all(follower.errors[p] <= 1 for p in moved), dict(follower.errors)
    assert follower.disagreements == []
    total = sum(len(v) for v in follower.acked.values())
    got = consume_range(cluster.bootstrap, topic, moved, total, 60)
    assert sorted(m.value() for m in got) == sorted(v for vs in follower.acked.values() for v in vs)
