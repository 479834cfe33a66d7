"""Table topics in a cluster: every broker converts the partitions it leads into one table.

Three real brokers share PostgreSQL (metadata, schema registry, SQL catalog)
and a moto S3 bucket (streams and the Iceberg warehouse). A broker is killed
with kill -9 while an idempotent producer goes on writing; its partitions move,
and their new leaders resume from the offsets in the table. The table ends with
every produced record exactly once: no record lost, no (partition, offset) twice.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

from tests.integration.broker.conftest import quiet
from tests.integration.broker.rawkafka import RawClient
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster, running_cluster

PARTITIONS = 6
RECORDS = 3000  # half before the kill, half after


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _catalog_props(database_url: str, s3_endpoint: str, warehouse: str) -> dict[str, str]:
    return {
        "uri": database_url.replace("postgresql://", "postgresql+psycopg2://", 1),
        "warehouse": warehouse,
        "s3.endpoint": s3_endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "test",
        "s3.secret-access-key": "test",
    }


@pytest.fixture
def cluster(tmp_path: Path, s3_endpoint: str) -> Iterator[tuple[TidelakeCluster, SqlCatalog]]:
    """Three brokers sharing the registry and the SQL catalog in the cluster's database."""
    warehouse = f"s3://{BUCKET}/warehouse-{uuid.uuid4().hex[:8]}"
    catalogs: list[SqlCatalog] = []

    def env(database_url: str) -> dict[str, str]:
        props = _catalog_props(database_url, s3_endpoint, warehouse)
        # the catalog's tables exist before the brokers start (none races to make them)
        catalogs.append(SqlCatalog("tidelake", **props))
        return {
            "TIDELAKE_REGISTRY_STORE_URL": database_url,
            "TIDELAKE_CATALOG_TYPE": "sql",
            "TIDELAKE_CATALOG_NAME": "tidelake",
            "TIDELAKE_CATALOG_URI": props["uri"],
            "TIDELAKE_CATALOG_WAREHOUSE": warehouse,
            "TIDELAKE_CATALOG_S3_ENDPOINT": s3_endpoint,
            "TIDELAKE_CATALOG_S3_REGION": "us-east-1",
            "TIDELAKE_CATALOG_S3_ACCESS_KEY_ID": "test",
            "TIDELAKE_CATALOG_S3_SECRET_ACCESS_KEY": "test",
            "TIDELAKE_TABLE_TOPIC_DEFAULT_COMMIT_INTERVAL_MS": "1000",
            "TIDELAKE_TABLE_TOPIC_RETRY_BACKOFF_MS": "200",
        }

    with running_cluster(tmp_path, s3_endpoint, nodes=3, env=env) as c:
        yield c, catalogs[0]


def _leaders(admin: AdminClient, topic: str, timeout: float = 30) -> dict[int, int]:
    deadline = time.monotonic() + timeout
    while True:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == PARTITIONS:
            leaders = {p: t.partitions[p].leader for p in t.partitions}
            if all(node >= 0 for node in leaders.values()):
                return leaders
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions of {topic} have no leaders: {t}")
        time.sleep(0.2)


def _rows(catalog: SqlCatalog, table: str) -> pa.Table | None:
    try:
        return catalog.load_table(("default", table)).scan().to_arrow()
    except NoSuchTableError:
        return None


def _produce(producer: Producer, topic: str, first: int, last: int, errors: list[Any]) -> None:
    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(first, last):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"r{i}".encode(),
            partition=i % PARTITIONS,
            on_delivery=done,
        )
        producer.poll(0)
    assert producer.flush(90) == 0


def _logs(cluster: TidelakeCluster) -> str:
    return "\n\n".join(f"node {n}:\n{p.log_tail(40)}" for n, p in cluster.nodes.items())


def test_a_table_topic_converts_every_record_once_across_a_broker_kill(
    cluster: tuple[TidelakeCluster, SqlCatalog],
) -> None:
    nodes, catalog = cluster
    topic = "clicks-cluster"
    table = "clicks_cluster"
    admin = AdminClient(quiet({"bootstrap.servers": nodes.bootstrap}))
    configs = {
        "table.topic.enable": "true",
        "table.topic.convert.value.type": "string",
        "table.topic.commit.interval.ms": "1000",
    }
    futs = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=configs)])
    futs[topic].result(timeout=30)
    leaders = _leaders(admin, topic)
    assert len(set(leaders.values())) == 3, f"leaders not spread over the brokers: {leaders}"

    producer = Producer(
        quiet(
            {
                "bootstrap.servers": nodes.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 90_000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
    )
    errors: list[Any] = []
    half = RECORDS // 2
    _produce(producer, topic, 0, half, errors)
    # every broker has committed its partitions' first half before one dies
    deadline = time.monotonic() + 60
    while True:
        rows = _rows(catalog, table)
        done = rows is not None and rows.num_rows >= half
        if done or time.monotonic() > deadline:
            assert done, (
                f"first half not in the table: {None if rows is None else rows.num_rows}\n{_logs(nodes)}"
            )
            break
        time.sleep(0.3)

    victim = leaders[0]
    nodes.nodes[victim].kill()
    _produce(producer, topic, half, RECORDS, errors)
    assert not errors, errors
    moved = sorted(p for p, n in leaders.items() if n == victim)

    deadline = time.monotonic() + 90
    rows = None
    while time.monotonic() < deadline:
        rows = _rows(catalog, table)
        if rows is not None and rows.num_rows >= RECORDS:
            break
        time.sleep(0.5)
    assert rows is not None and rows.num_rows >= RECORDS, (
        f"table has {None if rows is None else rows.num_rows} of {RECORDS} rows "
        f"(partitions {moved} moved from node {victim})\n{_logs(nodes)}"
    )
    time.sleep(3)  # a late commit of a stale leader would land by now
    rows = _rows(catalog, table)
    assert rows is not None
    pairs = Counter(
        zip(
            rows.column("_kafka_partition").to_pylist(),
            rows.column("_kafka_offset").to_pylist(),
            strict=True,
        )
    )
    twice = [pair for pair, n in pairs.items() if n > 1]
    assert not twice, f"converted twice: {twice[:10]}"
    assert rows.num_rows == RECORDS
    assert sorted(rows.column("value").to_pylist()) == sorted(f"r{i}" for i in range(RECORDS))
    for r in rows.select(["_kafka_partition", "value"]).to_pylist():
        assert int(r["value"][1:]) % PARTITIONS == r["_kafka_partition"]
    # the offsets in the snapshot are the table's single truth: every partition at its end
    snap = catalog.load_table(("default", table)).current_snapshot()
    assert snap is not None and snap.summary is not None
    offsets = json.loads(snap.summary.additional_properties["tidelake.offsets"])
    ends = Counter(rows.column("_kafka_partition").to_pylist())
    assert {int(p): o for p, o in offsets.items()} == dict(ends)


def _reassign(bootstrap: str, topic: str, partition: int, target: int) -> None:
    """AlterPartitionReassignments: ``partition`` to be led by ``target`` (asked again
    while the target is not yet seen live: a heartbeat may be late on a busy machine)."""
    deadline = time.monotonic() + 20
    while True:
        with RawClient(bootstrap, timeout=30) as raw:
            resp = raw.request(
                45,
                0,
                {
                    "timeout": 30_000,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": partition, "replicas": [target]}],
                        }
                    ],
                },
            )
        answer = resp.responses[0].partitions[0]
        if int(answer.error_code) == 0:
            return
        assert time.monotonic() < deadline, f"reassignment refused: {answer}"
        time.sleep(0.5)


def test_a_table_topic_converts_every_record_once_while_partitions_move(
    cluster: tuple[TidelakeCluster, SqlCatalog],
) -> None:
    """Leaders move between live brokers while records arrive and commits run every
    second: the old leader may still be committing when the new one starts, and
    the per-partition check lets at most one of them commit each offset."""
    nodes, catalog = cluster
    topic, table = "moves-cluster", "moves_cluster"
    admin = AdminClient(quiet({"bootstrap.servers": nodes.bootstrap}))
    configs = {
        "table.topic.enable": "true",
        "table.topic.convert.value.type": "string",
        "table.topic.commit.interval.ms": "1000",
    }
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=configs)])[topic].result(timeout=30)
    _leaders(admin, topic)
    producer = Producer(
        quiet(
            {
                "bootstrap.servers": nodes.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 90_000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
    )
    errors: list[Any] = []

    def load() -> None:  # 3000 records over about 12 s, in steps of 250
        for step in range(0, RECORDS, 250):
            _produce(producer, topic, step, step + 250, errors)
            time.sleep(1)

    writer = threading.Thread(target=load)
    writer.start()
    moves = 0
    try:
        for i in range(8):
            partition = i % PARTITIONS
            current = _leaders(admin, topic)
            target = next(n for n in sorted(nodes.nodes) if n != current[partition])
            _reassign(nodes.nodes[1].bootstrap, topic, partition, target)
            deadline = time.monotonic() + 30
            while _leaders(admin, topic).get(partition) != target:
                assert time.monotonic() < deadline, (
                    f"{topic}-{partition} did not move to {target}\n{_logs(nodes)}"
                )
                time.sleep(0.1)
            moves += 1
            time.sleep(0.7)  # between moves, commits land on both sides
    finally:
        writer.join(120)
    assert not writer.is_alive() and not errors, errors
    assert moves == 8

    deadline = time.monotonic() + 90
    rows = None
    while time.monotonic() < deadline:
        rows = _rows(catalog, table)
        if rows is not None and rows.num_rows >= RECORDS:
            break
        time.sleep(0.5)
    assert rows is not None and rows.num_rows >= RECORDS, (
        f"table has {None if rows is None else rows.num_rows} of {RECORDS} rows\n{_logs(nodes)}"
    )
    time.sleep(3)  # a late commit of a stale leader would land by now
    rows = _rows(catalog, table)
    assert rows is not None
    pairs = Counter(
        zip(
            rows.column("_kafka_partition").to_pylist(),
            rows.column("_kafka_offset").to_pylist(),
            strict=True,
        )
    )
    assert not [pair for pair, n in pairs.items() if n > 1], "a record was converted twice"
    assert rows.num_rows == RECORDS
    assert sorted(rows.column("value").to_pylist()) == sorted(f"r{i}" for i in range(RECORDS))
