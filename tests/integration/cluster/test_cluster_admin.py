"""Moving partitions as a Kafka admin would: AlterPartitionReassignments and
ListPartitionReassignments (kafka-python's admin client, as confluent-kafka
2.16 has no call for them), and ``tidelake cluster reassign|status``.

A partition has one replica, its leader; a reassignment names the broker
that should lead it, and the old leader hands it over (no data copied).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from tests.integration.broker.conftest import consume_range, quiet
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster
from tests.support.platform import TidelakeProcess
from tests.support.postgres import temporary_database

TIDELAKE = str(Path(sys.executable).with_name("tidelake"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeCluster]:
    """Three brokers with the count balancer off, so that only the tests move
    partitions (each test uses topics of its own)."""
    with ExitStack() as stack:
        s3 = stack.enter_context(moto_server())
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        url = stack.enter_context(temporary_database("tl_cluster_admin"))
        c = TidelakeCluster(tmp_path_factory.mktemp("admin"), url, s3)
        stack.callback(c.stop)
        for node in (1, 2, 3):
            c.start_node(node, TIDELAKE_CLUSTER_BALANCER="false")
        yield c


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(quiet({"bootstrap.servers": bootstrap}))


def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)


def _create(bootstrap: str, name: str, partitions: int) -> dict[int, int]:
    admin = _admin(bootstrap)
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futs[name].result(timeout=30)
    return _leaders(bootstrap, name, lambda ls: len(ls) == partitions and min(ls.values()) >= 0)


def _leaders(bootstrap: str, topic: str, done: Any, timeout: float = 30) -> dict[int, int]:
    """partition -> leader, polled from Metadata until ``done(leaders)``."""
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        leaders = {} if t is None or t.error else {p: t.partitions[p].leader for p in t.partitions}
        if done(leaders):
            return leaders
        assert time.monotonic() < deadline, f"{topic}: {leaders}"
        time.sleep(0.2)


def _produce(bootstrap: str, topic: str, partition: int, values: range) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap, "enable.idempotence": True}))
    for i in values:
        p.produce(topic, value=b"%d" % i, partition=partition)
    assert p.flush(30) == 0


def test_a_reassignment_moves_leadership_to_the_named_broker_and_keeps_the_data(
    cluster: TidelakeCluster,
) -> None:
    leaders = _create(cluster.bootstrap, "moving", 3)
    _produce(cluster.bootstrap, "moving", 0, range(50))
    old = leaders[0]
    target = next(n for n in cluster.nodes if n != old)
    # sent to the controller by kafka-python; any broker would accept it
    admin = _kp_admin(cluster.bootstrap)
    try:
        result = admin.alter_partition_reassignments({TopicPartition("moving", 0): [target]})
        assert result == {TopicPartition("moving", 0): None}
        after = _leaders(cluster.bootstrap, "moving", lambda ls: ls.get(0) == target)
        assert {p: after[p] for p in (1, 2)} == {p: leaders[p] for p in (1, 2)}
        deadline = time.monotonic() + 30
        while admin.list_partition_reassignments():  # nothing left in flight
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        admin.close()
    _produce(cluster.bootstrap, "moving", 0, range(50, 100))  # the new leader takes writes
    got = consume_range(cluster.bootstrap, "moving", [0], 100, 30)
    assert [int(m.value()) for m in got] == list(range(100))


def test_invalid_reassignments_get_kafkas_errors(cluster: TidelakeCluster) -> None:
    leaders = _create(cluster.bootstrap, "fixed", 1)
    other = next(n for n in cluster.nodes if n != leaders[0])
    tp = TopicPartition("fixed", 0)
    admin = _kp_admin(cluster.nodes[other].bootstrap)
    try:
        two = admin.alter_partition_reassignments({tp: [leaders[0], other]})
        assert two == {tp: InvalidReplicationAssignmentError}  # one replica: the leader
        unknown_broker = admin.alter_partition_reassignments({tp: [99]})
        assert unknown_broker == {tp: InvalidReplicationAssignmentError}
        missing = admin.alter_partition_reassignments({TopicPartition("fixed", 5): [other]})
        assert missing == {TopicPartition("fixed", 5): UnknownTopicOrPartitionError}
        nothing = admin.alter_partition_reassignments({tp: None})
        assert nothing == {tp: NoReassignmentInProgressError}
        same = admin.alter_partition_reassignments({tp: [leaders[0]]})
        assert same == {tp: None}  # already led there: nothing to do
        assert admin.list_partition_reassignments([tp]) == {}
    finally:
        admin.close()
    assert _leaders(cluster.bootstrap, "fixed", lambda ls: len(ls) == 1) == leaders


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TIDELAKE, "cluster", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_cli_reassign_waits_for_the_move_and_status_shows_the_new_leader(
    cluster: TidelakeCluster,
) -> None:
    leaders = _create(cluster.bootstrap, "cli-moved", 2)
    target = next(n for n in cluster.nodes if n != leaders[1])
    moved = _cli("reassign", "cli-moved:1", "--to", str(target), "--wait", "-b", cluster.bootstrap)
    assert moved.returncode == 0, moved.stderr
    assert f"now led by node {target}" in moved.stdout and " ms)" in moved.stdout
    assert _leaders(cluster.bootstrap, "cli-moved", lambda ls: len(ls) == 2)[1] == target

    https = [a for n in cluster.nodes for a in ("--http", cluster.nodes[n].http_url)]
    status = _cli("status", *https, "--json", "--sample-ms", "200")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    by_partition = {(p["topic"], p["partition"]): p["leader"] for p in info["partitions"]}
    assert by_partition[("cli-moved", 1)] == target
    assert by_partition[("cli-moved", 0)] == leaders[0]
    assert {b["node_id"] for b in info["brokers"]} == {1, 2, 3}
    assert all(b["live"] and not b["draining"] for b in info["brokers"])
    assert all(isinstance(b["produce_bytes_per_s"], float) for b in info["brokers"])
    assert info["controller"] in cluster.nodes
    assert info["moves_in_flight"] == []
    counts = {b["node_id"]: b["partitions"] for b in info["brokers"]}
    assert sum(counts.values()) == len(info["partitions"])

    table = _cli("status", "--http", cluster.nodes[1].http_url, "--sample-ms", "0")
    assert table.returncode == 0, table.stderr
    assert "controller: node" in table.stdout and "moves in flight: 0" in table.stdout
    for proc in cluster.nodes.values():
        assert f"127.0.0.1:{proc.kafka_port}" in table.stdout, table.stdout

    refused = _cli("reassign", "cli-moved:1", "--to", "42", "-b", cluster.bootstrap)
    assert refused.returncode == 1
    assert "INVALID_REPLICA_ASSIGNMENT" in refused.stderr.upper()


def test_a_single_broker_answers_as_a_one_broker_kafka_cluster(tmp_path: Path) -> None:
    with TidelakeProcess(tmp_path / "single") as broker:
        _create(broker.bootstrap, "alone", 1)
        me = _admin(broker.bootstrap).list_topics(timeout=10).controller_id
        tp = TopicPartition("alone", 0)
        admin = _kp_admin(broker.bootstrap)
        try:
            assert admin.alter_partition_reassignments({tp: [me]}) == {tp: None}
            elsewhere = admin.alter_partition_reassignments({tp: [me + 1]})
            assert elsewhere == {tp: InvalidReplicationAssignmentError}
            cancel = admin.alter_partition_reassignments({tp: None})
            assert cancel == {tp: NoReassignmentInProgressError}
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        status = _cli("status", "--http", broker.http_url, "--json", "--sample-ms", "100")
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["clustered"] is False
        assert [(b["node_id"], b["partitions"]) for b in info["brokers"]] == [(me, 1)]
