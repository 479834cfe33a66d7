"""Zero cross-AZ traffic end to end (issue #16) with real broker processes:
four brokers in two racks (a: 1, 2; b: 3, 4) on PostgreSQL and moto, and
confluent-kafka producers and consumers in both racks that announce their rack
only as Tidelake asks, ``tidelake_rack=<rack>`` in ``client.id`` (one consumer
also sets ``client.rack``). Metadata names a broker of the client's rack as
every partition's leader; that broker routes Produce through object storage,
serves Fetch from object storage and forwards ListOffsets and
OffsetForLeaderEpoch to the real leader. Idempotent acks=all producers; group
consumers from the earliest offset and one from the latest: every
acknowledged record consumed exactly once, in order; the payload bytes that
crossed racks (the brokers' rack metric) stay within the issue's 5 % of the
payload produced plus consumed. Clients that announce nothing see the real
leaders and read everything as before.

Four brokers of its own (the rack test module's cluster helper)."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.fetch.v10.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.cluster.peer_client import peer_request
from ingest.cluster.racks import preferred_read_replica
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.errors import ErrorCode
from tests.integration.broker.conftest import consume_range, quiet, unique
from tests.integration.cluster.test_cluster import _admin, _create
from tests.integration.cluster.test_cluster_racks import (
    ENDPOINTS,
    RACKS,
    _rack_bytes,
    _rack_cluster,
)
from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import TidelakeCluster

PARTITIONS = 8
PER_WAVE = 120  # records per partition per producer per wave
VALUE_SIZE = 1000
CROSS_RACK_TARGET = 0.05


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _client_id(role: str, rack: str) -> str:
    return f"zero-az-{role},tidelake_rack={rack}"


class _Member(threading.Thread):
    """A group consumer (subscribe) in ``rack``; records by partition."""

    def __init__(self, bootstrap: str, topic: str, conf: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": unique("zero-az"),
                    "fetch.wait.max.ms": 200,
                    "topic.metadata.refresh.interval.ms": 2000,
                    "statistics.interval.ms": 300,
                    "stats_cb": self._stats,
                    **conf,
                }
            )
        )
        self.topic = topic
        self.got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        # every partition fetched from a known offset (librdkafka's statistics)
        self.positioned = threading.Event()
        self.fetch_from: dict[int, int] = {}
        self.stop = threading.Event()

    def _stats(self, text: str) -> None:
        parts = json.loads(text).get("topics", {}).get(self.topic, {}).get("partitions", {})
        active = {
            int(q): int(p["next_offset"])
            for q, p in parts.items()
            if int(q) >= 0 and p.get("fetch_state") == "active" and int(p["next_offset"]) >= 0
        }
        if len(active) == PARTITIONS and not self.positioned.is_set():
            self.fetch_from = active
            self.positioned.set()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                m = self.consumer.poll(0.2)
                if m is None:
                    continue
                if (err := m.error()) is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(err))
                    continue
                q, offset, value = m.partition(), m.offset(), m.value()
                assert q is not None and offset is not None and value is not None
                self.got[q].append((offset, value))
        finally:
            self.consumer.close()

    def count(self) -> int:
        return sum(len(v) for v in self.got.values())


def _produce_wave(
    bootstrap: str, topic: str, wave: int, client_ids: list[str]
) -> dict[tuple[int, int], bytes]:
    """Each producer (one per client id, concurrently) sends ``PER_WAVE``
    records to every partition; (partition, offset) -> value as acknowledged."""
    acked: dict[tuple[int, int], bytes] = {}
    failures: list[str] = []
    lock = threading.Lock()

    def run(client_id: str) -> None:
        p = Producer(
            quiet(
                {
                    "bootstrap.servers": bootstrap,
                    "client.id": client_id,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                }
            )
        )

        def delivered(err: Any, msg: Any) -> None:
            with lock:
                if err is not None:
                    failures.append(str(err))
                else:
                    key = (msg.partition(), msg.offset())
                    assert key not in acked, f"two acks at {key}"
                    acked[key] = msg.value()

        for i in range(PER_WAVE):
            for q in range(PARTITIONS):
                value = f"{client_id}|{wave}|{q}|{i}|".encode().ljust(VALUE_SIZE, b"z")
                p.produce(topic, value=value, partition=q, on_delivery=delivered)
            p.poll(0)
        assert p.flush(60) == 0

    threads = [threading.Thread(target=run, args=(c,)) for c in client_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures[:5]
    assert len(acked) == PER_WAVE * PARTITIONS * len(client_ids)
    return acked


def _wait_for(members: list[_Member], want: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(m.count() < want for m in members):
        assert time.monotonic() < deadline, [m.count() for m in members]
        time.sleep(0.2)


def _check_exactly_once_in_order(
    member: _Member, acked: dict[tuple[int, int], bytes], first: dict[int, int]
) -> None:
    """``member`` read every acknowledged record at or after ``first[p]``, each
    once, in offset order, with the value acknowledged at that offset."""
    for q in range(PARTITIONS):
        want = sorted((o, v) for (p, o), v in acked.items() if p == q and o >= first[q])
        assert member.got[q] == want, f"partition {q}: {len(member.got[q])} vs {len(want)}"


def _known_everywhere(cluster: TidelakeCluster, topic: str) -> dict[int, int]:
    """The partitions' leaders, once every broker's Metadata names them all
    (a subscribing consumer may ask any broker)."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name=TopicName(topic), topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    deadline = time.monotonic() + 30
    while True:
        views = []
        for node in sorted(cluster.nodes):
            (t,) = _ask(cluster, node, 3, request, "plain-admin").topics
            views.append({int(p.partition_index): int(p.leader_id) for p in t.partitions})
        if all(v == views[0] and len(v) == PARTITIONS for v in views):
            if min(views[0].values()) >= 0:
                return views[0]
        assert time.monotonic() < deadline, views
        time.sleep(0.2)


def _metadata_leaders(bootstrap: str, topic: str, client_id: str | None) -> dict[int, int]:
    conf = {"bootstrap.servers": bootstrap}
    if client_id is not None:
        conf["client.id"] = client_id
    md = AdminClient(quiet(conf)).list_topics(topic, timeout=10)
    return {p: part.leader for p, part in md.topics[topic].partitions.items()}


def _ask(cluster: TidelakeCluster, node: int, key: int, request: Any, client_id: str) -> Any:
    """One request (a kio entity of its API's latest version here) to broker ``node``."""
    host, port = cluster.nodes[node].bootstrap.rsplit(":", 1)
    endpoint = BrokerEndpoint(node, host, int(port))
    version = int(request.__version__)
    return asyncio.run(peer_request(endpoint, key, version, request, 30, client_id))


def _check_forwarded(cluster: TidelakeCluster, topic: str, leaders: dict[int, int]) -> None:
    """ListOffsets, OffsetForLeaderEpoch and DeleteRecords from a rack-b
    client, at the rack-b broker Metadata names for a partition led in rack a:
    the leader's own answers. Without the token: the answer of a non-leader."""
    q, leader = next((q, n) for q, n in sorted(leaders.items()) if RACKS[n] == "a")
    routed = preferred_read_replica(topic, q, "b", leader, ENDPOINTS)
    assert routed is not None and RACKS[routed] == "b"
    tagged, plain = _client_id("admin", "b"), "plain-admin"

    def list_offsets(node: int, client_id: str, at: int) -> Any:
        request = ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(ListOffsetsPartition(partition_index=i32(q), timestamp=i64(at)),),
                ),
            ),
        )
        return _ask(cluster, node, 2, request, client_id).topics[0].partitions[0]

    for at in (-1, -2):  # latest, earliest
        want = list_offsets(leader, plain, at)
        assert want.error_code == ErrorCode.none and int(want.offset) >= 0
        assert list_offsets(routed, tagged, at) == want
        assert list_offsets(routed, plain, at).error_code != ErrorCode.none

    def epoch_end(node: int, client_id: str) -> Any:
        request = OffsetForLeaderEpochRequest(
            replica_id=BrokerId(-1),
            topics=(
                OffsetForLeaderTopic(
                    topic=TopicName(topic),
                    partitions=(OffsetForLeaderPartition(partition=i32(q), leader_epoch=i32(0)),),
                ),
            ),
        )
        return _ask(cluster, node, 23, request, client_id).topics[0].partitions[0]

    want = epoch_end(leader, plain)
    assert want.error_code == ErrorCode.none and int(want.end_offset) > 0
    assert epoch_end(routed, tagged) == want
    assert epoch_end(routed, plain).error_code == ErrorCode.not_leader_or_follower

    def delete(node: int, client_id: str) -> Any:
        request = DeleteRecordsRequest(
            topics=(
                DeleteRecordsTopic(
                    name=TopicName(topic),
                    partitions=(DeleteRecordsPartition(partition_index=i32(q), offset=i64(0)),),
                ),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        )
        return _ask(cluster, node, 21, request, client_id).topics[0].partitions[0]

    assert delete(routed, plain).error_code == ErrorCode.not_leader_or_follower
    done = delete(routed, tagged)  # offset 0: nothing deleted, the leader's low watermark
    assert (done.error_code, int(done.low_watermark)) == (ErrorCode.none, 0)


def test_rack_tagged_producers_and_consumers_in_both_racks_keep_payload_in_their_rack(
    tmp_path: Path, s3_endpoint: str
) -> None:
    with _rack_cluster(tmp_path, s3_endpoint) as cluster:
        topic = unique("zero-az")
        admin = _admin(cluster.bootstrap)
        _create(admin, topic, PARTITIONS)
        leaders = _known_everywhere(cluster, topic)
        assert {RACKS[n] for n in leaders.values()} == {"a", "b"}, leaders
        # Metadata: a rack-tagged client is told its rack leads everything;
        # a client that announces nothing gets the real leaders.
        for rack in ("a", "b"):
            routed = _metadata_leaders(cluster.bootstrap, topic, _client_id("admin", rack))
            assert {RACKS[n] for n in routed.values()} == {rack}, routed
            same = {q for q, n in leaders.items() if RACKS[n] == rack}
            assert {q for q in same if routed[q] == leaders[q]} == same
        assert _metadata_leaders(cluster.bootstrap, topic, None) == leaders
        assert _metadata_leaders(cluster.bootstrap, topic, "plain-client") == leaders

        members = [
            # rack a: the client.id token only (read_committed, librdkafka's default)
            _Member(
                cluster.bootstrap,
                topic,
                {"client.id": _client_id("consumer", "a"), "auto.offset.reset": "earliest"},
            ),
            # rack b: the token and client.rack
            _Member(
                cluster.bootstrap,
                topic,
                {
                    "client.id": _client_id("consumer", "b"),
                    "client.rack": "b",
                    "auto.offset.reset": "earliest",
                },
            ),
        ]
        for m in members:
            m.start()
        latest: _Member | None = None
        try:
            producers = [_client_id("producer", "a"), _client_id("producer", "b")]
            acked = _produce_wave(cluster.bootstrap, topic, 0, producers)
            # a consumer from the latest offset joins after the first wave
            latest = _Member(
                cluster.bootstrap,
                topic,
                {"client.id": _client_id("latest", "b"), "auto.offset.reset": "latest"},
            )
            latest.start()
            assert latest.positioned.wait(60), "the latest consumer got no position"
            ends = {q: max(o for (p, o) in acked if p == q) + 1 for q in range(PARTITIONS)}
            assert latest.fetch_from == ends  # the leader's ends, not the uploaded ones
            acked.update(_produce_wave(cluster.bootstrap, topic, 1, producers))
            total = len(acked)
            _wait_for(members, total, 90)
            _wait_for([latest], total - sum(ends.values()), 90)
            time.sleep(1)  # nothing more arrives
            for m in [*members, latest]:
                assert not m.errors, m.errors[:5]
            _check_forwarded(cluster, topic, leaders)
            zero = dict.fromkeys(range(PARTITIONS), 0)
            for m in members:
                _check_exactly_once_in_order(m, acked, zero)
            _check_exactly_once_in_order(latest, acked, ends)

            traffic = _rack_bytes(cluster)
            payload = sum(len(v) for v in acked.values())
            produced = sum(n for (_, _, d), n in traffic.items() if d == "produce")
            fetched = sum(n for (_, _, d), n in traffic.items() if d == "fetch")
            cross = sum(n for (b, c, _), n in traffic.items() if b != c)
            assert produced >= payload and fetched >= 2.5 * payload, traffic
            share = cross / (produced + fetched)
            print(
                f"cross-rack payload share: {share:.4%} ({cross:.0f} of {produced + fetched:.0f})"
            )
            assert share <= CROSS_RACK_TARGET, (share, traffic)
            # Rack-b consumers reading partitions led in rack a, and the
            # rack-b producer writing them, were served in rack b.
            assert traffic.get(("b", "b", "fetch"), 0) >= 1.5 * payload, traffic
            assert traffic.get(("b", "b", "produce"), 0) >= payload / 2, traffic
        finally:
            for m in [*members, *([latest] if latest else [])]:
                m.stop.set()
            for m in [*members, *([latest] if latest else [])]:
                m.join(10)

        # Clients that announce nothing: as with Kafka (real leaders, every record).
        plain = consume_range(cluster.bootstrap, topic, range(PARTITIONS), len(acked), 60)
        assert {(m.partition(), m.offset()): m.value() for m in plain} == acked
        traffic = _rack_bytes(cluster)
        assert traffic.get(("a", "", "fetch"), 0) > 0 and traffic.get(("b", "", "fetch"), 0) > 0


def _fetch_v10(
    cluster: TidelakeCluster, node: int, topic: str, q: int, offset: int, client_id: str
) -> Any:
    """One read_committed Fetch v10 (no rack field) of ``q`` at ``offset`` to ``node``."""
    request = FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(1),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(
                        partition=i32(q),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(offset),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return _ask(cluster, node, 1, request, client_id).responses[0].partitions[0]


def test_rack_tagged_read_committed_consumers_skip_aborted_transactions_at_any_fetch_version(
    tmp_path: Path, s3_endpoint: str
) -> None:
    """Transactions through a rack-routed producer; consumers routed by their
    client.id only: a replica cannot filter aborted transactions, so it reads
    the transactional part from the leader for them (Fetch v10 has no
    preferred read replica to send them there)."""
    with _rack_cluster(tmp_path, s3_endpoint) as cluster:
        topic = unique("zero-az-txn")
        admin = _admin(cluster.bootstrap)
        _create(admin, topic, PARTITIONS)
        leaders = _known_everywhere(cluster, topic)
        member = _Member(
            cluster.bootstrap,
            topic,
            {"client.id": _client_id("txn-consumer", "b"), "auto.offset.reset": "earliest"},
        )
        member.start()
        try:
            tp = Producer(
                quiet(
                    {
                        "bootstrap.servers": cluster.bootstrap,
                        "client.id": _client_id("txn-producer", "a"),
                        "transactional.id": unique("zero-az-tx"),
                    }
                )
            )
            tp.init_transactions(30)
            committed: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
            for n, commit in ((0, True), (1, False), (2, True)):
                tp.begin_transaction()
                for i in range(20):
                    for q in range(PARTITIONS):
                        value = b"%d:txn%d-%d" % (q, n, i)
                        tp.produce(topic, value=value, partition=q)
                        if commit:
                            committed[q].append(value)
                assert tp.flush(30) == 0
                if commit:
                    tp.commit_transaction(30)
                else:
                    tp.abort_transaction(30)
            want = sum(len(v) for v in committed.values())
            _wait_for([member], want, 90)
            time.sleep(1)
            assert not member.errors, member.errors[:5]
            for q in range(PARTITIONS):
                assert [v for _, v in member.got[q]] == committed[q], f"partition {q}"

            # Fetch v10 at the rack-b broker Metadata names for a partition led
            # in rack a: records from offset 0 with the aborted transaction
            # listed (read from the leader), as the leader itself answers.
            q, leader = next((q, n) for q, n in sorted(leaders.items()) if RACKS[n] == "a")
            routed = preferred_read_replica(topic, q, "b", leader, ENDPOINTS)
            assert routed is not None
            tagged = _client_id("v10", "b")
            at_leader = _fetch_v10(cluster, leader, topic, q, 0, "plain-v10")
            at_routed = _fetch_v10(cluster, routed, topic, q, 0, tagged)
            assert at_routed.error_code == ErrorCode.none and at_routed.records
            assert at_routed.aborted_transactions  # the aborted one meets the records
            assert (at_routed.records, at_routed.aborted_transactions) == (
                at_leader.records,
                at_leader.aborted_transactions,
            )
            plain = _fetch_v10(cluster, routed, topic, q, 0, "plain-v10")
            assert plain.error_code == ErrorCode.not_leader_or_follower  # as before
        finally:
            member.stop.set()
            member.join(10)
        assert _rack_bytes(cluster).get(("b", "b", "fetch"), 0) > 0
