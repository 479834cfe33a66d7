"""A secured cluster: three brokers, each with a SASL_SSL (SCRAM) listener
and a PLAINTEXT one (the inter-broker listener). Node 1 lists SASL_SSL first
(its default listener, the address it registers), nodes 2 and 3 PLAINTEXT
first, so neither listener is every broker's default. A client is always
sent to the listener it came in on: confluent-kafka over SASL_SSL,
bootstrapped from one broker only,
produces to and consumes from partitions led by every broker, joins a group
another broker coordinates and runs transactions whose markers cross brokers
over the PLAINTEXT listener; Metadata over PLAINTEXT still names PLAINTEXT
addresses. A broker whose inter-broker listener needs SASL refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker.conftest import quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.integration.s3stream.conftest import moto_server
from tests.integration.security.certs import TestPki, make_pki
from tests.support.cluster import BUCKET, TidelakeCluster, cluster_env
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess
from tests.support.postgres import temporary_database

USER, PASSWORD = "alice", "alice-secret-1"
ROOT = Path(__file__).resolve().parents[3]
NODES = (1, 2, 3)
ENV = {"TIDELAKE_BROKER_TRANSACTION_ABORT_INTERVAL_MS": "200"}


@dataclass
class SecureCluster:
    cluster: TidelakeCluster
    pki: TestPki
    root: Path
    sasl_ports: dict[int, int]  # node -> its SASL_SSL port
    plain_ports: dict[int, int]  # node -> its PLAINTEXT port

    def sasl(self, node: int) -> dict[str, Any]:
        """A confluent-kafka config over SASL_SSL with SCRAM, bootstrapped from ``node`` only."""
        return quiet(
            {
                "bootstrap.servers": f"127.0.0.1:{self.sasl_ports[node]}",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": USER,
                "sasl.password": PASSWORD,
                "ssl.ca.location": str(self.pki.ca),
            }
        )

    def plain(self, node: int) -> dict[str, Any]:
        return quiet({"bootstrap.servers": f"127.0.0.1:{self.plain_ports[node]}"})


def _node(
    root: Path, url: str, s3: str, prefix: str, pki: TestPki, node: int, listeners: list[str]
) -> TidelakeProcess:
    """A broker of the cluster with ``listeners`` (its PLAINTEXT port, if any,
    is the one the test harness waits for)."""
    data = root / f"node-{node}"
    data.mkdir(parents=True, exist_ok=True)
    config = root / f"node-{node}.toml"
    quoted = ", ".join(f'"{x}"' for x in listeners)
    config.write_text(
        f"""
[broker]
listeners = [{quoted}]
ssl_certfile = "{pki.server_cert}"
ssl_keyfile = "{pki.server_key}"
"""
    )
    wait_on = next(
        (int(x.rsplit(":", 1)[1]) for x in listeners if x.startswith("PLAINTEXT://")),
        int(listeners[0].rsplit(":", 1)[1]),
    )
    return TidelakeProcess(
        data,
        env={**cluster_env(url, s3, node, prefix), **ENV},
        config_file=config,
        kafka_port=wait_on,
    )


def _ordered(node: int, sasl_ssl: str, plaintext: str) -> list[str]:
    """Node 1's default listener is SASL_SSL, the others' PLAINTEXT."""
    return [sasl_ssl, plaintext] if node == 1 else [plaintext, sasl_ssl]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    root = tmp_path_factory.mktemp("secure-cluster")
    pki = make_pki(root / "pki")
    with moto_server() as s3, temporary_database("tl_cluster") as url:
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        made = subprocess.run(
            [
                *(sys.executable, "-m", "api.cli", "users", "create", USER, "--password-stdin"),
                *("--data-dir", str(root / "users")),
            ],
            input=PASSWORD + "\n",
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            env={**os.environ, "TIDELAKE_METADATA_URL": url},
        )
        assert made.returncode == 0, made.stderr
        cluster = TidelakeCluster(root, url, s3)
        sasl = {n: free_port() for n in NODES}
        plain = {n: free_port() for n in NODES}
        try:
            for n in NODES:
                proc = _node(
                    root,
                    url,
                    s3,
                    cluster.prefix,
                    pki,
                    n,
                    _ordered(
                        n, f"SASL_SSL://127.0.0.1:{sasl[n]}", f"PLAINTEXT://127.0.0.1:{plain[n]}"
                    ),
                )
                cluster.nodes[n] = proc
                proc.start()
            yield SecureCluster(cluster, pki, root, sasl, plain)
        finally:
            cluster.stop()


def _wait_for_brokers(conf: dict[str, Any], want: int) -> dict[int, tuple[str, int]]:
    """Metadata's brokers (node -> (host, port)) once it lists ``want`` of them."""
    admin = AdminClient(conf)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(timeout=10)
        brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
        if len(brokers) == want or time.monotonic() > deadline:
            return brokers
        time.sleep(0.3)


def _create(conf: dict[str, Any], topic: str, partitions: int) -> dict[int, int]:
    """Create ``topic`` and return partition -> leader once every one has a leader."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            leaders = {p: t.partitions[p].leader for p in t.partitions}
            if all(x >= 0 for x in leaders.values()):
                return leaders
        assert time.monotonic() < deadline, f"{topic} has partitions without a leader: {t}"
        time.sleep(0.2)


def _spread_topic(secure: SecureCluster, prefix: str, partitions: int = 6) -> str:
    """A topic whose partitions are led by every broker (created over SASL_SSL)."""
    for _ in range(5):
        topic = unique(prefix)
        leaders = _create(secure.sasl(1), topic, partitions)
        if set(leaders.values()) == set(NODES):
            return topic
    raise AssertionError(f"no topic of {partitions} partitions spread over {NODES}: {leaders}")


def _read(
    conf: dict[str, Any], topic: str, partitions: int, isolation: str, timeout: float = 60
) -> dict[int, list[bytes]]:
    """Every record of ``topic`` a consumer with ``isolation`` reads, per
    partition, up to the end of each partition."""
    c = Consumer(
        {
            **conf,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out[m.partition()].append(m.value())
        assert len(at_end) == partitions, f"only partitions {sorted(at_end)} read to the end"
        return out
    finally:
        c.close()


def _coordinator(plain_bootstrap: str, key: str, key_type: int = 0) -> tuple[int, int]:
    """(node id, port) FindCoordinator names over the PLAINTEXT listener."""
    with RawClient(plain_bootstrap) as c:
        resp = c.request(10, 1, {"key": key, "key_type": key_type})
    assert resp.error_code == 0, resp
    return int(resp.node_id), int(resp.port)


def test_each_listener_names_every_broker_at_its_own_address(secure: SecureCluster) -> None:
    want_sasl = {n: ("127.0.0.1", p) for n, p in secure.sasl_ports.items()}
    want_plain = {n: ("127.0.0.1", p) for n, p in secure.plain_ports.items()}
    # Metadata, asked of each broker on each listener
    for n in NODES:
        assert _wait_for_brokers(secure.sasl(n), 3) == want_sasl
        assert _wait_for_brokers(secure.plain(n), 3) == want_plain
    # DescribeCluster
    for conf, want in ((secure.sasl(2), want_sasl), (secure.plain(2), want_plain)):
        admin = AdminClient(conf)  # kept alive until its future is done
        described = admin.describe_cluster().result(timeout=30)
        assert {b.id: (b.host, b.port) for b in described.nodes} == want
    # FindCoordinator over PLAINTEXT names the coordinator's PLAINTEXT port
    node, port = _coordinator(f"127.0.0.1:{secure.plain_ports[1]}", unique("g"))
    assert port == secure.plain_ports[node]


def test_sasl_ssl_clients_produce_and_consume_on_partitions_led_by_every_broker(
    secure: SecureCluster,
) -> None:
    topic = _spread_topic(secure, "lsn")
    count, partitions = 600, 6
    producer = Producer({**secure.sasl(1), "enable.idempotence": True, "linger.ms": 5})
    failed: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=b"%d-%d" % (i % partitions, i // partitions),
            partition=i % partitions,
            on_delivery=lambda err, _msg: err is not None and failed.append(err),
        )
    assert producer.flush(60) == 0
    assert failed == []
    # a group whose coordinator is not the broker the consumer bootstraps from
    plain_1 = f"127.0.0.1:{secure.plain_ports[1]}"
    group = next(
        g for g in (unique("lsn-group") for _ in range(100)) if _coordinator(plain_1, g)[0] != 1
    )
    coordinator = _coordinator(plain_1, group)[0]
    consumer = Consumer(
        {
            **secure.sasl(1),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: dict[int, list[bytes]] = defaultdict(list)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while sum(len(v) for v in got.values()) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append(m.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
    finally:
        consumer.close()
    for p in range(partitions):  # exactly once, in order, on every broker's partitions
        assert got[p] == [b"%d-%d" % (p, k) for k in range(count // partitions)], p
    assert {tp.partition: tp.offset for tp in committed} == {
        p: count // partitions for p in range(partitions)
    }
    # the group's coordinator, as FindCoordinator named it to the SASL_SSL client
    admin = AdminClient(secure.sasl(1))
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert described.coordinator.id == coordinator
    assert described.coordinator.port == secure.sasl_ports[coordinator]


def test_transactions_over_sasl_ssl_span_brokers(secure: SecureCluster) -> None:
    topic = _spread_topic(secure, "lsn-tx")
    partitions = 6
    # a coordinator other than node 1, so markers must reach node 1 on its
    # PLAINTEXT listener, which is not its default one
    plain_1 = f"127.0.0.1:{secure.plain_ports[1]}"
    tid = next(
        t for t in (unique("lsn-tid") for _ in range(100)) if _coordinator(plain_1, t, 1)[0] != 1
    )
    producer = Producer(
        {**secure.sasl(1), "transactional.id": tid, "transaction.timeout.ms": 20_000}
    )
    producer.init_transactions(60)
    for kind, commit in ((b"c1", True), (b"a", False), (b"c2", True)):
        producer.begin_transaction()
        for i in range(60):
            producer.produce(topic, value=b"%s-%d" % (kind, i), partition=i % partitions)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(30)
            producer.abort_transaction(60)
    committed = _read(secure.sasl(2), topic, partitions, "read_committed")
    for p in range(partitions):
        want = [b"%s-%d" % (kind, i) for kind in (b"c1", b"c2") for i in range(p, 60, partitions)]
        assert committed[p] == want, p
    everything = _read(secure.sasl(3), topic, partitions, "read_uncommitted")
    assert sum(len(v) for v in everything.values()) == 180
    # FindCoordinator for a transactional id over PLAINTEXT names PLAINTEXT
    txn_node, txn_port = _coordinator(plain_1, tid, key_type=1)
    assert txn_node != 1
    assert txn_port == secure.plain_ports[txn_node]


def test_a_cluster_broker_whose_inter_broker_listener_needs_sasl_does_not_start(
    secure: SecureCluster,
) -> None:
    c = secure.cluster
    proc = _node(
        secure.root,
        c.metadata_url,
        c.s3_endpoint,
        c.prefix,
        secure.pki,
        9,
        [f"SASL_SSL://127.0.0.1:{free_port()}"],
    )
    try:
        with pytest.raises(RuntimeError, match="inter_broker_listener_name") as failed:
            proc.start(timeout=60)
    finally:
        proc.stop()
    assert "PLAINTEXT" in str(failed.value)
    assert 9 not in {b for b in _wait_for_brokers(secure.plain(1), 3)}
