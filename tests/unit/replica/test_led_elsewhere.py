"""Partition requests of a rack-tagged client (``tidelake_rack=`` in its
client.id) at a broker that does not lead the partition: forwarded to the
leader; a leader that cannot be reached gives NOT_LEADER_OR_FOLLOWER
(retriable: the client refreshes its metadata). Clients without the token,
and a broker outside a cluster, answer as before. (The leader's answers
passed back are checked with real brokers in
tests/integration/cluster/test_cluster_zero_az.py.)"""

from __future__ import annotations

import datetime
import socket
from collections.abc import AsyncIterator, Sequence

import pytest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.broker import Broker
from ingest.cluster.view import BrokerEndpoint
from ingest.config import BrokerConfig
from ingest.handlers import (
    delete_records,
    describe_producers,
    list_offsets,
    offset_for_leader_epoch,
)
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import leader_elsewhere
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.s3stream import MemoryStreamEngine

_TOPIC = "elsewhere"
_TAGGED = "svc,tidelake_rack=b"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class _LedByTwo:
    """This broker (node 3, rack b) of a cluster where node 2 (rack a, not
    listening) leads everything."""

    node_id = 3
    clustered = True

    def __init__(self) -> None:
        self._brokers = (
            BrokerEndpoint(2, "127.0.0.1", _closed_port(), "a"),
            BrokerEndpoint(3, "127.0.0.1", 9003, "b"),
        )

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return self._brokers

    def controller_id(self) -> int:
        return 2

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return 2, 0

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return self._brokers[0]


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(BrokerConfig(port=0, rack="b"), MemoryMetadataStore(), MemoryStreamEngine())
    await b.engine.start()
    await b.logs.load()
    await b.logs.create_topic(_TOPIC, 1, 1, {})
    topic = b.logs.get(_TOPIC)
    assert topic is not None
    topic.logs.clear()  # the partition exists; another broker serves it
    b.cluster = _LedByTwo()
    try:
        yield b
    finally:
        await b.engine.close()


def _ctx(broker: Broker, key: int, version: int, client_id: str) -> RequestContext:
    return RequestContext(broker, key, version, 1, client_id, "127.0.0.1")


async def _list_offsets(broker: Broker, client_id: str) -> ErrorCode:
    request = ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(0),
        topics=(
            ListOffsetsTopic(
                name=TopicName(_TOPIC),
                partitions=(ListOffsetsPartition(partition_index=i32(0), timestamp=i64(-1)),),
            ),
        ),
    )
    response = await list_offsets.handle(_ctx(broker, 2, 8, client_id), request)
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def _epoch_end(broker: Broker, client_id: str) -> ErrorCode:
    request = OffsetForLeaderEpochRequest(
        replica_id=BrokerId(-1),
        topics=(
            OffsetForLeaderTopic(
                topic=TopicName(_TOPIC),
                partitions=(OffsetForLeaderPartition(partition=i32(0), leader_epoch=i32(0)),),
            ),
        ),
    )
    response = await offset_for_leader_epoch.handle(_ctx(broker, 23, 4, client_id), request)
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def _delete(broker: Broker, client_id: str) -> ErrorCode:
    request = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name=TopicName(_TOPIC),
                partitions=(DeleteRecordsPartition(partition_index=i32(0), offset=i64(0)),),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
    )
    response = await delete_records.handle(_ctx(broker, 21, 2, client_id), request)
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def _producers(broker: Broker, client_id: str) -> PartitionResponse:
    request = DescribeProducersRequest(
        topics=(TopicRequest(name=TopicName(_TOPIC), partition_indexes=(i32(0),)),)
    )
    response = await describe_producers.handle(_ctx(broker, 61, 0, client_id), request)
    return response.topics[0].partitions[0]


async def test_an_unreachable_leader_gives_a_tagged_client_a_retriable_error(
    broker: Broker,
) -> None:
    assert await _list_offsets(broker, _TAGGED) == ErrorCode.not_leader_or_follower
    assert await _epoch_end(broker, _TAGGED) == ErrorCode.not_leader_or_follower
    assert await _delete(broker, _TAGGED) == ErrorCode.not_leader_or_follower
    assert (await _producers(broker, _TAGGED)).error_code == ErrorCode.not_leader_or_follower


async def test_clients_without_the_token_get_the_answers_they_got_before(
    broker: Broker,
) -> None:
    plain_error = broker.logs.partition_error(_TOPIC, 0)
    for client_id in ("svc", "svc,rack=b"):
        assert await _list_offsets(broker, client_id) == ErrorCode.unknown_topic_or_partition
        assert await _epoch_end(broker, client_id) == plain_error
        assert await _delete(broker, client_id) == plain_error
        assert (await _producers(broker, client_id)).error_code == plain_error


async def test_only_partitions_led_by_another_live_broker_are_forwarded(broker: Broker) -> None:
    ctx = _ctx(broker, 2, 8, _TAGGED)
    leader = leader_elsewhere(ctx, _TOPIC, 0)
    assert leader is not None and leader.node_id == 2
    assert leader_elsewhere(ctx, _TOPIC, 1) is None  # no such partition
    assert leader_elsewhere(ctx, "nope", 0) is None
    assert leader_elsewhere(_ctx(broker, 2, 8, "svc"), _TOPIC, 0) is None


async def test_describe_producers_of_a_tagged_client_is_answered_by_the_leader(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the leader (node 2) knows of the partition: one producer.
    known = PartitionResponse(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=(
            ProducerState(
                producer_id=ProducerId(7),
                producer_epoch=i32(1),
                last_sequence=i32(41),
                last_timestamp=i64(-1),
                coordinator_epoch=i32(0),
                current_txn_start_offset=i64(-1),
            ),
        ),
    )
    asked: list[tuple[int, int, int, object]] = []

    async def leader_answers(
        ctx: RequestContext,
        key: int,
        version: int,
        requests: Sequence[tuple[BrokerEndpoint, object]],
    ) -> list[object | None]:
        asked.extend((key, version, e.node_id, r) for e, r in requests)
        return [
            DescribeProducersResponse(
                throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                topics=(TopicResponse(name=TopicName(_TOPIC), partitions=(known,)),),
            )
        ]

    monkeypatch.setattr(describe_producers, "ask_leaders", leader_answers)
    assert await _producers(broker, _TAGGED) == known
    assert [(k, v, node) for k, v, node, _ in asked] == [(61, 0, 2)]
    # a client without the token is told to go to the leader, as Kafka does
    asked.clear()
    assert (await _producers(broker, "svc")).error_code != ErrorCode.none
    assert asked == []
