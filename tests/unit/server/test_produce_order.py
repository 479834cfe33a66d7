"""Pipelined Produce requests of one connection append in arrival order even
when the first waits (for a partition moving to this broker): otherwise the
second, finding the partition ready, appends its later idempotent sequence
first and the first is refused OUT_OF_ORDER_SEQUENCE_NUMBER, which a client
takes as fatal."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from ingest.broker import Broker
from ingest.cluster.view import SingleBrokerView
from ingest.config import BrokerConfig
from ingest.metadata import SqliteMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from ingest.server.connection import ProduceOrder
from ingest.server.dispatcher import Dispatcher

_TOPIC = "moving"
_PID = 42


class _Conn:
    peer = "test"

    def __init__(self) -> None:
        self.produce_order = ProduceOrder()  # as a KafkaConnection has

    def abort(self) -> None:
        raise AssertionError("the connection must stay open")


class _ClusteredView(SingleBrokerView):
    @property
    def clustered(self) -> bool:
        return True


@asynccontextmanager
async def single_topic_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker on a file WAL with the one-partition topic ``_TOPIC``."""
    config = S3StreamConfig.model_validate(
        {"wal_dir": tmp_path / "wal", "wal_segment_bytes": 1 << 20, "upload_interval_ms": 60_000}
    )
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    engine = open_engine(config, metadata, MemoryObjectStore())
    b = Broker(BrokerConfig(port=0), metadata, engine)
    await engine.start()
    await b.logs.load()
    await b.logs.create_topic(_TOPIC, 1, 1, {})
    try:
        yield b
    finally:
        await engine.close()


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with single_topic_broker(tmp_path) as b:
        b.cluster = _ClusteredView(b.cluster.brokers()[0])
        yield b


def _frame(correlation_id: int, sequence: int, acks: int = -1) -> bytes:
    batch = build_batch(
        [(b"k", b"v%d" % sequence, [], 1_700_000_000_000)],
        producer_id=_PID,
        producer_epoch=0,
        base_sequence=sequence,
    )
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(
            TopicProduceData(
                name=TopicName(_TOPIC),
                partition_data=(PartitionProduceData(index=i32(0), records=batch),),
            ),
        ),
    )
    body = io.BytesIO()
    entity_writer(ProduceRequest)(body, request)
    client = b"test"
    return (
        struct.pack(">hhih", 0, 9, correlation_id, len(client)) + client + b"\0" + body.getvalue()
    )


def _outcome(data: bytes) -> tuple[int, int]:
    response, _ = entity_reader(ProduceResponse)(memoryview(data), 9)
    (part,) = response.responses[0].partition_responses
    return int(part.error_code), int(part.base_offset)


async def test_a_later_request_does_not_overtake_one_waiting_for_a_moving_partition(
    broker: Broker,
) -> None:
    topic = broker.logs.topics[_TOPIC]
    plog = topic.logs.pop(0)  # the partition is moving here: not served yet

    async def moving_in(_topic: str, _partition: int, _wait_s: float) -> None:
        await asyncio.sleep(0.1)  # the first request waits out the hand-over

    broker.await_partition = moving_in  # type: ignore[method-assign]
    dispatcher, conn = Dispatcher(broker), _Conn()
    first = asyncio.ensure_future(dispatcher(memoryview(_frame(1, 0)), conn))  # type: ignore[arg-type]
    await asyncio.sleep(0.02)
    topic.logs[0] = plog  # open now: a request arriving from here on finds it
    second = asyncio.ensure_future(dispatcher(memoryview(_frame(2, 1)), conn))  # type: ignore[arg-type]
    results = [_outcome(await asyncio.wait_for(f, 10)) for f in (first, second)]
    assert results == [(ErrorCode.none, 0), (ErrorCode.none, 1)]


async def test_a_request_served_at_once_does_not_overtake_one_framed_before_it(
    tmp_path: Path,
) -> None:
    """Framed in one read: an acks=0 request (served in a task, not started
    yet) then an acks=all one, which could be served at once: it must wait
    its turn, or its sequence would arrive first."""
    async with single_topic_broker(tmp_path) as broker:
        dispatcher, conn = Dispatcher(broker), _Conn()
        assert dispatcher(memoryview(_frame(1, 0, acks=0)), conn) is None  # type: ignore[arg-type]
        second = dispatcher(memoryview(_frame(2, 1)), conn)  # type: ignore[arg-type]
        assert conn.produce_order.tasks == 2  # both on the task path, in order
        assert _outcome(await asyncio.wait_for(second, 10)) == (ErrorCode.none, 1)
        assert conn.produce_order.tasks == 0
        third = dispatcher(memoryview(_frame(3, 2)), conn)  # type: ignore[arg-type]
        assert conn.produce_order.tasks == 0  # nothing before it: served at once
        assert _outcome(await asyncio.wait_for(third, 10)) == (ErrorCode.none, 2)
