"""The console's Brokers page and /metrics on a cluster of two brokers
(PostgreSQL metadata, moto S3): both brokers, the controller, partitions
led and each broker's bytes/s from its load report."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import boto3
import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.api.test_console import cells, load, rows
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster
from tests.support.postgres import temporary_database


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeCluster]:
    with ExitStack() as stack:
        s3 = stack.enter_context(moto_server())
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        url = stack.enter_context(temporary_database("tl_console"))
        c = TidelakeCluster(tmp_path_factory.mktemp("console-cluster"), url, s3)
        stack.callback(c.stop)
        for node in (1, 2):
            c.start_node(node, TIDELAKE_CLUSTER_BALANCER="false")
        yield c


def test_brokers_page_shows_every_broker_the_controller_and_partitions_led(
    cluster: TidelakeCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("spread", 4, 1)])["spread"].result(30)
    node = cluster.nodes[1]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c = httpx.get(f"{node.http_url}/api/v1/cluster?sample_ms=0", timeout=10).json()
        if len(c["brokers"]) == 2 and sum(b["partitions"] for b in c["brokers"]) == 4:
            break
        time.sleep(0.5)
    # traffic on both brokers' partitions while the page loads: their load
    # reports (bytes/s over the last seconds) reach it
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        i = 0
        while not stop.is_set():
            producer.produce("spread", value=b"x" * 1000, partition=i % 4)
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        producer.flush(30)

    traffic = threading.Thread(target=produce, daemon=True)
    traffic.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            c = httpx.get(f"{node.http_url}/api/v1/cluster?sample_ms=0", timeout=10).json()
            loads = c.get("balancer", {}).get("loads", {})
            if len(loads) == 2 and all(v["bytes_in_per_s"] > 0 for v in loads.values()):
                break
            time.sleep(0.5)
        page = load(f"{node.http_url}/ui/#/brokers")
    finally:
        stop.set()
        traffic.join(30)
    brokers = rows(page, "brokers-table")
    # bytes/s in and out for each broker, not only the one serving the page
    assert all(len(re.findall(r"B/s", r)) == 2 for r in brokers), brokers
    assert all(re.search(r"[1-9][\d.]* (?:[KMGT]i)?B/s", r) for r in brokers), brokers
    assert [cells(r)[0] for r in brokers] == ["1", "2"]
    assert all("live" in r for r in brokers)
    assert sum(int(cells(r)[4]) for r in brokers) == 4  # partitions led, over both
    assert page.text("controller") in ("1", "2")
    assert "cluster" in page.dom


def test_a_cluster_node_exposes_object_store_metrics(cluster: TidelakeCluster) -> None:
    text = httpx.get(f"{cluster.nodes[2].http_url}/metrics", timeout=10).text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"tidelake_object_store_requests", "tidelake_object_store_degraded"} <= names
    assert re.search(r'^tidelake_object_store_requests_total\{.*outcome="ok".*\} [1-9]', text, re.M)
