"""A cluster with every listener secured: three brokers, each with ONLY a
SASL_SSL listener (SCRAM-SHA-512), the ACL authorizer on with
``allow_everyone_if_no_acl_found = false`` and ``super_users = ["User:broker"]``.
The brokers call each other on that listener as ``broker`` (a user made with
``tidelake users create``), so a transactional confluent-kafka producer over
SASL_SSL commits and aborts transactions whose markers cross brokers, and a
read_committed consumer sees exactly the committed records, with no
authentication failure logged anywhere. A fourth broker configured with a
wrong inter-broker password gets its markers refused: its log says so, the
records stay invisible to read_committed readers, and once it is gone the
coordinator that takes its transactional id over finishes the commit.
Brokers 1 and 2 are in rack a, broker 3 in rack b: a rack-b producer and
consumer (``tidelake_rack=b`` in client.id) keep their payload in rack b while
the brokers hand produce to each other and forward requests over the secured
inter-broker listener."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ingest.cluster.view import BrokerEndpoint, hashed_coordinator
from tests.integration.broker.conftest import quiet, unique
from tests.integration.s3stream.conftest import moto_server
from tests.integration.security.certs import TestPki, make_pki
from tests.support.cluster import BUCKET, TidelakeCluster, cluster_env
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess
from tests.support.postgres import temporary_database

ROOT = Path(__file__).resolve().parents[3]
NODES = (1, 2, 3)
APP, APP_PASSWORD = "alice", "alice-secret-1"
BROKER, BROKER_PASSWORD = "broker", "broker-secret-1"
ENV = {
    "TIDELAKE_BROKER_TRANSACTION_ABORT_INTERVAL_MS": "200",
    # no partition moves to a joining broker while a test reads: what moves
    # where is not what this module tests
    "TIDELAKE_CLUSTER_BALANCER": "false",
}
AUTH_FAILED = "authentication failed"  # what a broker logs for a refused login
PARTITIONS = 6
RACKS = {1: "a", 2: "a", 3: "b"}


@dataclass
class SecuredCluster:
    cluster: TidelakeCluster
    pki: TestPki
    root: Path
    ports: dict[int, int]  # node -> its SASL_SSL port

    def client(self, user: str = APP, password: str = APP_PASSWORD) -> dict[str, Any]:
        return quiet(
            {
                "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in self.ports.values()),
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": password,
                "ssl.ca.location": str(self.pki.ca),
            }
        )

    def node(self, node: int, password: str = BROKER_PASSWORD) -> TidelakeProcess:
        """A broker with only a SASL_SSL listener, calling its peers as ``broker``."""
        port = free_port()
        data = self.root / f"node-{node}"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / f"node-{node}.toml"
        config.write_text(
            f"""
[broker]
listeners = ["SASL_SSL://127.0.0.1:{port}"]
ssl_certfile = "{self.pki.server_cert}"
ssl_keyfile = "{self.pki.server_key}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
{f'rack = "{RACKS[node]}"' if node in RACKS else ""}
authorizer = "acl"
allow_everyone_if_no_acl_found = false
super_users = ["User:{BROKER}"]
acl_refresh_interval_ms = 200
inter_broker_sasl_mechanism = "SCRAM-SHA-512"
inter_broker_sasl_username = "{BROKER}"
inter_broker_ssl_cafile = "{self.pki.ca}"
"""
        )
        c = self.cluster
        proc = TidelakeProcess(
            data,
            env={
                **cluster_env(c.metadata_url, c.s3_endpoint, node, c.prefix),
                **ENV,
                # the password comes from the environment, not the file
                "TIDELAKE_BROKER_INTER_BROKER_SASL_PASSWORD": password,
            },
            config_file=config,
            kafka_port=port,
        )
        self.cluster.nodes[node] = proc
        self.ports[node] = port
        return proc


def _cli(url: str, root: Path, *args: str, stdin: str | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", *args, "--data-dir", str(root / "cli")],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "TIDELAKE_METADATA_URL": url},
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    root = tmp_path_factory.mktemp("secured-cluster")
    pki = make_pki(root / "pki")
    with moto_server() as s3, temporary_database("tl_cluster") as url:
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        for user, password in ((BROKER, BROKER_PASSWORD), (APP, APP_PASSWORD)):
            _cli(url, root, "users", "create", user, "--password-stdin", stdin=password + "\n")
        # the application may use topics, groups and transactional ids named sec-*
        for resource in ("--topic", "--group", "--transactional-id"):
            _cli(
                url,
                root,
                *("acls", "add", "--allow", f"User:{APP}", "--operation", "all"),
                *(resource, "sec-", "--prefixed"),
            )
        _cli(
            url,
            root,
            "acls",
            "add",
            "--allow",
            f"User:{APP}",
            "--operation",
            "idempotent_write",
            "--cluster",
        )
        secured = SecuredCluster(TidelakeCluster(root, url, s3), pki, root, {})
        try:
            for n in NODES:
                secured.node(n).start()
            yield secured
        finally:
            secured.cluster.stop()


def _wait_for_brokers(conf: dict[str, Any], want: set[int]) -> None:
    admin = AdminClient(conf)
    deadline = time.monotonic() + 60
    while True:
        brokers = set(admin.list_topics(timeout=10).brokers)
        if brokers == want:
            return
        assert time.monotonic() < deadline, f"brokers {brokers}, wanted {want}"
        time.sleep(0.3)


def _spread_topic(conf: dict[str, Any], nodes: set[int]) -> tuple[str, dict[int, int]]:
    """A topic whose partitions are led by every broker of ``nodes``
    (created by the application user): (name, partition -> leader)."""
    admin = AdminClient(conf)
    for _ in range(5):
        topic = unique("sec-tx")
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
            topic
        ].result(timeout=30)
        deadline = time.monotonic() + 30
        while True:
            t = admin.list_topics(topic, timeout=10).topics.get(topic)
            if t is not None and t.error is None and len(t.partitions) == PARTITIONS:
                leaders = {p: t.partitions[p].leader for p in t.partitions}
                if all(x >= 0 for x in leaders.values()):
                    break
            assert time.monotonic() < deadline, f"{topic} has partitions without a leader"
            time.sleep(0.2)
        if set(leaders.values()) == nodes:
            return topic, leaders
    raise AssertionError(f"no topic of {PARTITIONS} partitions spread over {nodes}: {leaders}")


def _read(
    conf: dict[str, Any], topic: str, timeout: float = 60, partitions: set[int] | None = None
) -> dict[int, list[bytes]]:
    """What a read_committed consumer reads of every partition (of
    ``partitions``), up to its end."""
    wanted = set(range(PARTITIONS)) if partitions is None else partitions
    c = Consumer(
        {
            **conf,
            "group.id": unique("sec-reader"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in sorted(wanted)])
        out: dict[int, list[bytes]] = {p: [] for p in sorted(wanted)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while at_end != wanted and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            err, p, value = m.error(), m.partition(), m.value()
            assert p is not None
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                at_end.add(p)
                continue
            assert value is not None
            at_end.discard(p)
            out[p].append(value)
        assert at_end == wanted, f"only partitions {sorted(at_end)} read to the end"
        return out
    finally:
        c.close()


def _tid_coordinated_by(node: int, live: set[int]) -> str:
    """A transactional id the broker ``node`` coordinates while ``live`` are up."""
    endpoints = [BrokerEndpoint(n, "127.0.0.1", 0) for n in sorted(live)]
    return next(
        t
        for t in (unique("sec-tid") for _ in range(1000))
        if hashed_coordinator(t, endpoints).node_id == node
    )


def _transactions(
    conf: dict[str, Any], topic: str, tid: str, runs: list[tuple[bytes, bool]]
) -> None:
    producer = Producer({**conf, "transactional.id": tid, "transaction.timeout.ms": 30_000})
    producer.init_transactions(60)
    for kind, commit in runs:
        producer.begin_transaction()
        for i in range(60):
            producer.produce(topic, value=b"%s-%d" % (kind, i), partition=i % PARTITIONS)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(30)
            producer.abort_transaction(60)


def _logs(secured: SecuredCluster, nodes: set[int] | tuple[int, ...]) -> dict[int, str]:
    return {n: secured.cluster.nodes[n].log_path.read_text(errors="replace") for n in nodes}


def test_transactions_commit_and_abort_across_brokers_with_every_listener_secured(
    secured: SecuredCluster,
) -> None:
    conf = secured.client()
    _wait_for_brokers(conf, set(NODES))
    topic, leaders = _spread_topic(conf, set(NODES))
    # a coordinator whose markers must reach both other brokers
    coordinator = 2
    tid = _tid_coordinated_by(coordinator, set(NODES))
    assert {leaders[p] for p in range(PARTITIONS)} - {coordinator}
    _transactions(conf, topic, tid, [(b"c1", True), (b"a", False), (b"c2", True)])
    committed = _read(conf, topic)
    for p in range(PARTITIONS):
        want = [b"%s-%d" % (k, i) for k in (b"c1", b"c2") for i in range(p, 60, PARTITIONS)]
        assert committed[p] == want, (p, leaders[p])
    # the console of one broker reads the others over the secured
    # inter-broker listener too: every partition's end from its leader
    detail = httpx.get(
        f"{secured.cluster.nodes[1].http_url}/api/v1/topics/{topic}/detail", timeout=30
    ).json()
    assert detail["unreachable_brokers"] == [], detail
    for part in detail["partitions"]:
        # three transactions of 60 records over the partitions, a marker each
        assert part["high_watermark"] == 3 * (60 // PARTITIONS) + 3, part
    for node, text in _logs(secured, NODES).items():
        assert AUTH_FAILED not in text, node
        assert "marker not written yet" not in text, node


def test_markers_of_a_broker_with_a_wrong_inter_broker_password_are_refused(
    secured: SecuredCluster,
) -> None:
    conf = secured.client()
    _wait_for_brokers(conf, set(NODES))
    topic, _ = _spread_topic(conf, set(NODES))
    wrong = secured.node(4, password="not-the-password").start()
    try:
        _wait_for_brokers(conf, {*NODES, 4})
        tid = _tid_coordinated_by(4, {*NODES, 4})
        _transactions(conf, topic, tid, [(b"w", True)])
        # node 4 committed, but the partitions' leaders refuse its markers
        deadline = time.monotonic() + 30
        while "SASL_AUTHENTICATION_FAILED" not in _logs(secured, {4})[4]:
            assert time.monotonic() < deadline, wrong.log_tail()
            time.sleep(0.3)
        log = _logs(secured, {4})[4]
        assert f"as {BROKER} with SCRAM-SHA-512" in log
        assert "marker not written yet" in log
        assert any(AUTH_FAILED in text for text in _logs(secured, NODES).values())
        # no marker where node 4 does not lead: the transaction stays open there
        elsewhere = {p for p, leader in _current_leaders(conf, topic).items() if leader != 4}
        assert elsewhere
        visible = _read(conf, topic, timeout=30, partitions=elsewhere)
        assert visible == {p: [] for p in elsewhere}
    finally:
        wrong.stop()
    # the transactional id moves to a broker with the right password, which
    # completes the commit: every record, once
    want = {p: [b"w-%d" % i for i in range(p, 60, PARTITIONS)] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while True:
        try:
            got = _read(conf, topic, timeout=20)
        except AssertionError:  # partitions still moving off node 4
            got = {}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert got == want


def _current_leaders(conf: dict[str, Any], topic: str) -> dict[int, int]:
    t = AdminClient(conf).list_topics(topic, timeout=10).topics[topic]
    return {p: t.partitions[p].leader for p in t.partitions}


def test_a_rack_tagged_producer_and_consumer_stay_in_their_rack_on_the_secured_cluster(
    secured: SecuredCluster,
) -> None:
    from tests.integration.cluster.test_cluster_racks import _rack_bytes

    plain = secured.client()
    _wait_for_brokers(plain, set(NODES))
    topic, leaders = _spread_topic(plain, set(NODES))
    tagged = {**plain, "client.id": "sec-app,tidelake_rack=b"}
    before = _rack_bytes(secured.cluster)
    producer = Producer({**tagged, "enable.idempotence": True, "acks": "all"})
    failed: list[object] = []
    for i in range(120):
        producer.produce(
            topic,
            value=b"r-%d" % i,
            partition=i % PARTITIONS,
            on_delivery=lambda err, _m: failed.append(err) if err is not None else None,
        )
    assert producer.flush(60) == 0 and failed == []
    # the rack's broker serves partitions led in rack a from object storage:
    # records show there once their leader uploaded them (the upload interval)
    want = {p: [b"r-%d" % i for i in range(p, 120, PARTITIONS)] for p in range(PARTITIONS)}
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    consumer = Consumer({**tagged, "group.id": unique("sec-rack-b"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while got != want and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append(m.value())
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        assert got[p] == want[p], (p, leaders[p])
    moved = {
        k: v - before.get(k, 0)
        for k, v in _rack_bytes(secured.cluster).items()
        if v - before.get(k, 0) > 0
    }
    # rack a's brokers (1, 2) lead partitions, yet no rack-b payload reached them
    assert moved.get(("b", "b", "produce"), 0) > 0 and moved.get(("b", "b", "fetch"), 0) > 0
    assert not any(k[0] == "a" and k[1] == "b" for k in moved), moved


def test_the_cli_moves_a_partition_of_the_secured_cluster_with_a_command_config(
    secured: SecuredCluster,
) -> None:
    plain = secured.client()
    _wait_for_brokers(plain, set(NODES))
    topic, leaders = _spread_topic(plain, set(NODES))
    target = next(n for n in NODES if n != leaders[0])
    props = secured.root / "broker-client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER}" password="{BROKER_PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.pki.ca}\n"
    )
    bootstrap = f"127.0.0.1:{secured.ports[1]}"
    move = [sys.executable, "-m", "api.cli", "cluster", "reassign", f"{topic}:0"]
    move += ["--to", str(target), "--wait", "--bootstrap-server", bootstrap]
    done = subprocess.run(
        [*move, "--command-config", str(props)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"now led by node {target}" in done.stdout
    assert _current_leaders(plain, topic)[0] == target
    # alice may not alter the cluster: the broker's answer, not a hang
    alice = secured.root / "alice-client.properties"
    alice.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={APP}\nsasl.password={APP_PASSWORD}\nssl.ca.location={secured.pki.ca}\n"
    )
    back = [*move[:6], "--to", str(leaders[0]), "--bootstrap-server", bootstrap]
    refused = subprocess.run(
        [*back, "--command-config", str(alice)], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode != 0 and "cluster_authorization_failed" in refused.stderr.lower()
