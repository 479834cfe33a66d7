"""The console and the lag gauges see the whole cluster (issue #21): three
real brokers (PostgreSQL metadata, moto S3), consumer groups coordinated by
each of them and a topic whose partitions each has another leader. Every
broker's console lists every group with its coordinator, members and lag
against the leaders' high watermarks; /metrics exports each group once."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from api.cluster_reads import ClusterReads, ListedGroup, PeerReads
from ingest.cluster.view import BrokerEndpoint, hashed_coordinator
from tests.integration.api.test_console import cells, load, rows
from tests.integration.broker.conftest import quiet
from tests.integration.cluster.test_cluster import _admin, _create, _leaders
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster, running_cluster

TOPIC = "spread"
PRODUCED = {0: 10, 1: 11, 2: 12}  # records per partition
COMMITTED = {0: 4, 1: 5, 2: 6}  # what every classic group commits


def _group_on(node: int, prefix: str) -> str:
    """A group id the hash puts on broker ``node`` of brokers 1, 2, 3."""
    return next(
        g for i in range(1000) if zlib.crc32((g := f"{prefix}-{i}").encode()) % 3 == node - 1
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeCluster]:
    with (
        moto_server() as s3,
        running_cluster(
            tmp_path_factory.mktemp("console"),
            s3,
            nodes=3,
            env=lambda _url: {"TIDELAKE_CLUSTER_BALANCER": "false"},
        ) as c,
    ):
        yield c


def _consumer(bootstrap: str, group: str, protocol: str = "classic") -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{group}-app",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = 30000
    return Consumer(quiet(conf))


def _wait_assigned(c: Consumer, want: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(c.assignment()) < want:
        assert time.monotonic() < deadline, f"assigned {c.assignment()}"
        c.poll(0.2)


def _commit(c: Consumer, offsets: dict[int, int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.commit(
                offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            c.poll(0.5)


def _get(url: str) -> Any:
    r = httpx.get(url, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def groups(cluster: TidelakeCluster) -> Iterator[dict[str, int]]:
    """A classic group coordinated by each broker (group id -> coordinator),
    one member each, offsets committed; plus a KIP-848 group."""
    admin = _admin(cluster.bootstrap)
    _create(admin, TOPIC, 3)
    leaders = _leaders(admin, TOPIC, 3)
    assert len(set(leaders.values())) > 1, leaders  # partitions led by different brokers
    p = Producer(quiet({"bootstrap.servers": cluster.bootstrap, "acks": "all"}))
    for partition, n in PRODUCED.items():
        for i in range(n):
            p.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(60) == 0
    wanted = {_group_on(node, "console-app"): node for node in (1, 2, 3)}
    kip848 = _group_on(2, "console-next")
    consumers = []
    try:
        for group in wanted:
            c = _consumer(cluster.bootstrap, group)
            c.subscribe([TOPIC])
            consumers.append(c)
        for c in consumers:
            _wait_assigned(c, 3)
        for c in consumers:
            _commit(c, COMMITTED)
        nxt = _consumer(cluster.bootstrap, kip848, "consumer")
        nxt.subscribe([TOPIC])
        consumers.append(nxt)
        _wait_assigned(nxt, 3)
        _commit(nxt, {0: 10, 1: 11, 2: 12})
        yield {**wanted, kip848: 2}
    finally:
        for c in consumers:
            c.close()


def _expected_lag() -> int:
    return sum(PRODUCED[p] - COMMITTED[p] for p in PRODUCED)


def test_every_broker_lists_every_group_with_its_coordinator_members_and_lag(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    kip848 = next(g for g in groups if g.startswith("console-next"))
    for node, proc in cluster.nodes.items():
        deadline = time.monotonic() + 30
        while True:
            listing = _get(f"{proc.http_url}/api/v1/groups")
            by_id = {g["group_id"]: g for g in listing["groups"]}
            ready = all(
                g in by_id and by_id[g]["state"] == "Stable" and by_id[g]["members"] == 1
                for g in groups
            )
            if ready or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert listing["unreachable_brokers"] == [], node
        for group, coordinator in groups.items():
            g = by_id[group]
            assert (g["coordinator"], g["coordinator_answered"]) == (coordinator, True), (node, g)
            assert (g["state"], g["members"], g["topics"]) == ("Stable", 1, [TOPIC]), (node, g)
            assert g["lag"] == (0 if group == kip848 else _expected_lag()), (node, g)
        assert by_id[kip848]["group_type"] == "consumer"


def test_a_group_page_on_any_broker_shows_members_assignment_and_lag_per_partition(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    kip848 = next(g for g in groups if g.startswith("console-next"))
    for proc in cluster.nodes.values():
        for group, coordinator in groups.items():
            d = _get(f"{proc.http_url}/api/v1/groups/{group}")
            assert (d["coordinator"], d["coordinator_answered"], d["state"]) == (
                coordinator,
                True,
                "Stable",
            )
            [member] = d["members"]
            assert member["client_id"] == f"{group}-app"
            assert member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1, 2]}]
            committed = {0: 10, 1: 11, 2: 12} if group == kip848 else COMMITTED
            assert [
                (o["partition"], o["committed"], o["high_watermark"], o["lag"])
                for o in d["offsets"]
            ] == [(p, committed[p], PRODUCED[p], PRODUCED[p] - committed[p]) for p in PRODUCED]
            assert d["unreachable_brokers"] == []


def test_topic_page_shows_every_partitions_leader_and_offsets(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    leaders = _leaders(_admin(cluster.bootstrap), TOPIC, 3)
    seen_sizes: dict[int, list[int]] = {}
    for node, proc in cluster.nodes.items():
        t = _get(f"{proc.http_url}/api/v1/topics/{TOPIC}/detail")
        assert [
            (p["partition"], p["leader"], p["led_here"], p["log_start_offset"], p["high_watermark"])
            for p in t["partitions"]
        ] == [(p, leaders[p], leaders[p] == node, 0, PRODUCED[p]) for p in PRODUCED]
        # every partition's size, asked of its leader (DescribeLogDirs)
        sizes = [p["size_bytes"] for p in t["partitions"]]
        assert all(isinstance(b, int) and b > 0 for b in sizes), sizes
        seen_sizes[node] = sizes
        [summary] = [
            s for s in _get(f"{proc.http_url}/api/v1/topic-summaries") if s["name"] == TOPIC
        ]
        assert summary["messages"] == sum(PRODUCED.values())
        assert summary["size_bytes"] == sum(sizes) and not summary["size_partial"]
    assert len({tuple(v) for v in seen_sizes.values()}) == 1, seen_sizes  # one answer each


def test_metrics_export_each_groups_lag_once_by_its_coordinator(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    exported: dict[str, list[tuple[int, float]]] = {}
    for node, proc in cluster.nodes.items():
        text = httpx.get(f"{proc.http_url}/metrics", timeout=30).text
        for family in text_string_to_metric_families(text):
            if family.name != "tidelake_consumer_group_lag":
                continue
            for sample in family.samples:
                if sample.labels["group"] in groups:
                    exported.setdefault(sample.labels["group"], []).append((node, sample.value))
    for group, coordinator in groups.items():
        nodes = {n for n, _ in exported[group]}
        assert nodes == {coordinator}, (group, exported[group])
        assert len(exported[group]) == 3  # one series per partition, none missing
        want = 0 if group.startswith("console-next") else _expected_lag()
        assert sum(v for _, v in exported[group]) == want


def test_groups_page_on_one_broker_shows_a_group_another_broker_coordinates(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    elsewhere = next(g for g, n in groups.items() if n == 2 and g.startswith("console-app"))
    page = load(f"{cluster.nodes[1].http_url}/ui/#/groups")
    row = next(r for r in rows(page, "groups-table") if f" {elsewhere} " in r)
    assert cells(row) == [elsewhere, "Stable", "1", TOPIC, "2", str(_expected_lag())]
    detail = load(f"{cluster.nodes[1].http_url}/ui/#/groups/{elsewhere}")
    assert detail.text("group-coordinator") == "broker 2"
    assert detail.text("group-lag") == str(_expected_lag())
    assert "spread [0, 1, 2]" in detail.text("members-table")


def test_message_browser_on_any_broker_reads_partitions_led_elsewhere(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    leaders = _leaders(_admin(cluster.bootstrap), TOPIC, 3)
    for node, proc in cluster.nodes.items():
        for partition, leader in leaders.items():
            if leader == node:
                continue
            url = f"{proc.http_url}/api/v1/topics/{TOPIC}/messages?partition={partition}"
            page = _get(url)
            assert page["high_watermark"] == PRODUCED[partition]
            values = [m["value"]["text"] for m in page["messages"]]
            assert values == [f"{partition}-{i}" for i in range(PRODUCED[partition])]
            ts = page["messages"][3]["timestamp"]
            later = _get(f"{url}&offset=7&limit=2")
            assert [m["offset"] for m in later["messages"]] == [7, 8]
            by_time = _get(f"{url}&timestamp={ts}")
            assert by_time["messages"][0]["offset"] <= 3  # first at or after the time


def test_message_browser_reads_committed_records_of_a_partition_led_elsewhere(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    admin = _admin(cluster.bootstrap)
    _create(admin, "ledger", 1)
    [leader] = _leaders(admin, "ledger", 1).values()
    conf = {"bootstrap.servers": cluster.bootstrap, "transactional.id": "console-ledger"}
    p = Producer(quiet(conf))
    p.init_transactions(30)
    for commit, values in ((False, ["lost-0", "lost-1"]), (True, ["kept-0", "kept-1"])):
        p.begin_transaction()
        for v in values:
            p.produce("ledger", value=v.encode(), partition=0)
        assert p.flush(30) == 0  # written before the abort (an abort drops queued records)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    other = next(proc for n, proc in cluster.nodes.items() if n != leader)
    url = f"{other.http_url}/api/v1/topics/ledger/messages?partition=0"
    committed = [m["value"]["text"] for m in _get(url)["messages"]]
    assert committed == ["kept-0", "kept-1"]
    everything = [m["value"]["text"] for m in _get(f"{url}&isolation=read_uncommitted")["messages"]]
    assert everything == ["lost-0", "lost-1", "kept-0", "kept-1"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_groups_cli_on_one_broker_lists_and_describes_every_groups_coordinator_and_lag(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    bootstrap = cluster.nodes[1].bootstrap  # one broker only: the rest is found through it
    r = _cli("groups", "list", "--json", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    listed = {g["group"]: g for g in json.loads(r.stdout)}
    for group, coordinator in groups.items():
        g = listed[group]
        classic = group.startswith("console-app")
        assert (g["coordinator"], g["state"], g["members"]) == (coordinator, "Stable", 1), g
        assert g["type"] == ("Classic" if classic else "Consumer"), g
        assert g["lag"] == (_expected_lag() if classic else 0), g
    elsewhere = next(g for g, n in groups.items() if n == 3)
    r = _cli("groups", "describe", elsewhere, "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    assert f"Coordinator: 3\tLag: {_expected_lag()}" in r.stdout
    assert f"client {elsewhere}-app" in r.stdout and "[spread-0, spread-1, spread-2]" in r.stdout
    for p in PRODUCED:
        assert (
            f"{TOPIC}\t{p}\t{COMMITTED[p]}\t{PRODUCED[p]}\t{PRODUCED[p] - COMMITTED[p]}" in r.stdout
        )
    r = _cli("groups", "describe", "nobody-here", "-b", bootstrap)
    assert r.returncode == 1 and "does not exist" in r.stderr


class _View:
    """Brokers 1-4 as a cluster view: the coordinator hash over all four."""

    def __init__(self, brokers: Sequence[BrokerEndpoint]) -> None:
        self._brokers = list(brokers)

    @property
    def node_id(self) -> int:
        return 1

    @property
    def clustered(self) -> bool:
        return True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return self._brokers

    def controller_id(self) -> int:
        return 1

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return -1, 0

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return hashed_coordinator(group, self._brokers)


class _NoGroups:
    async def list_groups(self) -> list[ListedGroup]:
        return []


def test_peer_reads_name_a_refusing_and_a_silent_broker_and_read_a_live_one(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens: connection refused
    live = cluster.nodes[2]
    endpoints = [
        BrokerEndpoint(1, "127.0.0.1", 1),
        BrokerEndpoint(2, "127.0.0.1", live.kafka_port),
        BrokerEndpoint(3, "127.0.0.1", silent.getsockname()[1]),
        BrokerEndpoint(4, "127.0.0.1", closed_port),
    ]
    reads = ClusterReads(
        lambda: _View(endpoints),  # type: ignore[arg-type, return-value]
        _NoGroups(),  # type: ignore[arg-type]
        lambda e: PeerReads(e, 1.0),
        timeout_s=1.0,
    )
    try:
        started = time.monotonic()
        listing = asyncio.run(reads.list_groups())
        took = time.monotonic() - started
    finally:
        silent.close()
    assert took < 2.5  # one timeout, the brokers asked in parallel
    assert listing.unreachable == [3, 4]
    listed = {g.group_id: g for g in listing.groups}
    assert set(groups) <= set(listed)  # every group broker 2 lists (it lists stored ones too)
    here = [g for g in listing.groups if g.coordinator == 2]
    assert all(g.coordinator_answered for g in here)
    assert all(
        not g.coordinator_answered and g.state == "Unknown"
        for g in listing.groups
        if g.coordinator in (3, 4)
    )


def test_a_killed_broker_is_named_on_the_others_consoles_never_an_error(
    cluster: TidelakeCluster, groups: dict[str, int]
) -> None:
    """Runs last in this module: it kills broker 3."""
    on3 = next(g for g, n in groups.items() if n == 3)
    cluster.nodes[3].kill()
    listing = _get(f"{cluster.nodes[1].http_url}/api/v1/groups")
    by_id = {g["group_id"]: g for g in listing["groups"]}
    # its lease (2 s, renewed every 0.3 s) has not run out yet: the others still
    # count it live, ask it, and get no answer
    assert listing["unreachable_brokers"] == [3]
    assert (by_id[on3]["state"], by_id[on3]["coordinator_answered"]) == ("Unknown", False)
    detail = _get(f"{cluster.nodes[1].http_url}/api/v1/groups/{on3}")
    assert (detail["state"], detail["coordinator_answered"]) == ("Unknown", False)
    assert [o["committed"] for o in detail["offsets"]] == [4, 5, 6]  # from the shared store
    # once the lease ran out, the group has a live coordinator and every page reads whole
    deadline = time.monotonic() + 30
    while True:
        listing = _get(f"{cluster.nodes[1].http_url}/api/v1/groups")
        by_id = {g["group_id"]: g for g in listing["groups"]}
        if not listing["unreachable_brokers"] and by_id[on3]["coordinator"] in (1, 2):
            break
        assert time.monotonic() < deadline, listing
        time.sleep(0.5)
    assert set(groups) <= set(by_id)
    detail = _get(f"{cluster.nodes[2].http_url}/api/v1/groups/{on3}")
    assert detail["unreachable_brokers"] == [] and detail["coordinator"] in (1, 2)
