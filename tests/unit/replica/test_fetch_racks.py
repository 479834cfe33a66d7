"""The leader's side of rack-aware fetching (KIP-392) in the Fetch handler:
a consumer of another rack is sent to a broker of its rack with no records,
unless what it would read needs the leader's transaction state; consumers of
the leader's rack, without a rack or below Fetch v11 are served as before.
A consumer that announces its rack only in ``client.id`` (``tidelake_rack=``)
is served here, never sent away (Metadata sends it to its rack's broker), and
Metadata names that broker as the leader to rack-tagged clients only."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Sequence

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import PartitionData
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.broker import Broker
from ingest.cluster.racks import preferred_read_replica
from ingest.cluster.view import BrokerEndpoint
from ingest.config import BrokerConfig
from ingest.handlers import fetch, metadata
from ingest.handlers.base import RequestContext
from ingest.log.partition import PartitionLog
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch
from ingest.s3stream import MemoryStreamEngine

_TOPIC = "racks"
_BROKERS = (
    BrokerEndpoint(1, "127.0.0.1", 9001, "a"),
    BrokerEndpoint(2, "127.0.0.1", 9002, "b"),
    BrokerEndpoint(3, "127.0.0.1", 9003, "b"),
)


class _TwoRacks:
    """This broker (node 1, rack a) of a three-broker cluster leads everything."""

    node_id = 1
    clustered = True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return _BROKERS

    def controller_id(self) -> int:
        return 1

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return 1, 0

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return _BROKERS[0]


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(
        BrokerConfig(port=0, fetch_max_wait_cap_ms=50, rack="a"),
        MemoryMetadataStore(),
        MemoryStreamEngine(),
    )
    await b.engine.start()
    await b.logs.load()
    await b.logs.create_topic(_TOPIC, 1, 1, {})
    b.cluster = _TwoRacks()
    try:
        yield b
    finally:
        await b.engine.close()


def _log(broker: Broker) -> PartitionLog:
    log = broker.logs.partition(_TOPIC, 0)
    assert log is not None
    return log


async def _append(log: PartitionLog, data: bytes) -> None:
    out = log.append(data)
    assert out.error == ErrorCode.none and out.durable is not None, out
    await out.durable


def _batch(pid: int = -1, seq: int = -1) -> bytes:
    return build_batch(
        [(None, b"x", [], 1000), (None, b"y", [], 1001)],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        attributes=0x10 if pid >= 0 else 0,
    )


async def _fetch(
    broker: Broker,
    offset: int,
    rack: str,
    *,
    committed: bool = False,
    version: int = 12,
    client_id: str = "test",
) -> PartitionData:
    request = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        isolation_level=i8(1 if committed else 0),
        topics=(
            FetchTopic(
                topic=TopicName(_TOPIC),
                partitions=(
                    FetchPartition(
                        partition=i32(0), fetch_offset=i64(offset), partition_max_bytes=i32(1 << 20)
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id=rack,
    )
    ctx = RequestContext(broker, 1, version, 1, client_id, "127.0.0.1")
    response = await fetch.handle(ctx, request)
    (part,) = response.responses[0].partitions
    return part


REPLICA = preferred_read_replica(_TOPIC, 0, "b", 1, _BROKERS)


async def test_a_consumer_of_another_rack_is_sent_to_a_broker_of_its_rack(broker: Broker) -> None:
    await _append(_log(broker), _batch())
    part = await _fetch(broker, 0, "b")
    assert REPLICA in (2, 3)
    assert (part.error_code, part.records, part.preferred_read_replica) == (
        ErrorCode.none,
        b"",
        REPLICA,
    )
    assert (part.high_watermark, part.log_start_offset) == (2, 0)
    # read_committed, no transactional data: sent there too
    part = await _fetch(broker, 0, "b", committed=True)
    assert (part.records, part.preferred_read_replica) == (b"", REPLICA)


async def test_the_leaders_rack_no_rack_and_old_versions_are_served_here(broker: Broker) -> None:
    await _append(_log(broker), _batch())
    for rack, version in (("a", 12), ("", 12), ("b", 10), ("c", 12)):
        part = await _fetch(broker, 0, rack, version=version)
        assert part.preferred_read_replica == -1 and part.records, (rack, version)


async def test_an_offset_out_of_range_is_answered_by_the_leader(broker: Broker) -> None:
    await _append(_log(broker), _batch())
    part = await _fetch(broker, 5, "b")
    assert part.error_code == ErrorCode.offset_out_of_range
    assert part.preferred_read_replica == -1


async def test_read_committed_stays_on_the_leader_while_transactions_are_in_reach(
    broker: Broker,
) -> None:
    log = _log(broker)
    await _append(log, _batch())  # 0-1
    await _append(log, _batch(pid=7, seq=0))  # 2-3: a transaction, open
    # before the transaction: the replica can serve [0, 2)... but the read here
    # holds only what is below the LSO, which has no transactional batch
    part = await _fetch(broker, 0, "b", committed=True)
    assert part.preferred_read_replica == REPLICA
    # at the open transaction: served here (it waits at the LSO)
    part = await _fetch(broker, 2, "b", committed=True)
    assert (part.preferred_read_replica, part.records) == (-1, b"")
    assert part.last_stable_offset == 2
    # read_uncommitted consumers go to the replica whatever the transactions
    part = await _fetch(broker, 2, "b")
    assert part.preferred_read_replica == REPLICA
    marker = log.write_marker(7, 0, True, 0)  # 4: commit
    assert marker.durable is not None
    await marker.durable
    await _append(log, _batch())  # 5-6
    # the committed transaction's batches are in the read: served here, in full
    part = await _fetch(broker, 2, "b", committed=True)
    assert part.preferred_read_replica == -1 and part.records
    assert part.last_stable_offset == 7
    # past the marker: back to the replica
    part = await _fetch(broker, 5, "b", committed=True)
    assert part.preferred_read_replica == REPLICA


async def test_a_consumer_with_its_rack_only_in_client_id_is_served_by_the_leader(
    broker: Broker,
) -> None:
    """Never sent away with preferred_read_replica (before v11 it has no such
    field); its bytes are counted for the rack it announces."""
    await _append(_log(broker), _batch())
    for version in (12, 10, 4):
        part = await _fetch(broker, 0, "", version=version, client_id="svc,tidelake_rack=b")
        assert part.preferred_read_replica == -1 and part.records, version
    assert broker.rack_traffic.totals()[("b", "fetch")] > 0
    # client.rack, sent with v11+, takes precedence over the token
    part = await _fetch(broker, 0, "b", client_id="svc,tidelake_rack=a")
    assert (part.records, part.preferred_read_replica) == (b"", REPLICA)


async def _metadata(broker: Broker, client_id: str | None) -> tuple[int, int, tuple[int, ...]]:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name=TopicName(_TOPIC), topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    ctx = RequestContext(broker, 3, 12, 1, client_id, "127.0.0.1")
    response = await metadata.handle(ctx, request)
    (part,) = response.topics[0].partitions
    assert part.error_code == ErrorCode.none
    assert part.isr_nodes == part.replica_nodes
    return int(part.leader_id), int(part.leader_epoch), tuple(int(n) for n in part.replica_nodes)


async def test_metadata_names_a_broker_of_the_clients_rack_as_leader(broker: Broker) -> None:
    assert await _metadata(broker, "svc;tidelake_rack=b") == (REPLICA, 0, (REPLICA,))
    # the leader's own rack, no token, an unknown rack: the real leader
    for client_id in ("svc tidelake_rack=a", "svc", None, "svc,tidelake_rack=zz"):
        assert await _metadata(broker, client_id) == (1, 0, (1,)), client_id
