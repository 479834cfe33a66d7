"""Produce responses carry the engine's object-storage backpressure as their
throttle time: while the object store is degraded the records are still
accepted and the client is asked to slow down; while it is healthy, no throttle."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from ingest.broker import Broker
from ingest.config import BrokerConfig
from ingest.metadata import SqliteMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from ingest.s3stream.objectstore.health import ObjectStoreHealth
from ingest.server.dispatcher import Dispatcher

_MIB = 1 << 20
_TOPIC = "bp"


class _WatchedStore(MemoryObjectStore):
    """An in-memory object store with the health tracker the S3 store keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.health = ObjectStoreHealth("test store")


class _Conn:
    peer = "test"

    def abort(self) -> None:
        raise AssertionError("the connection must stay open")


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[Broker, _WatchedStore]]:
    store = _WatchedStore()
    config = S3StreamConfig.model_validate(
        {"wal_dir": tmp_path / "wal", "wal_segment_bytes": _MIB, "upload_interval_ms": 60_000}
    )
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    engine = open_engine(config, metadata, store)
    b = Broker(BrokerConfig(port=0), metadata, engine)
    await engine.start()
    await b.logs.load()
    await b.groups.start()
    await b.logs.create_topic(_TOPIC, 1, 1, {})
    try:
        yield b, store
    finally:
        await b.groups.close()
        await engine.close()


def _produce_frame(correlation_id: int) -> bytes:
    batch = build_batch([(b"k", b"v", [], 1_700_000_000_000)])
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
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
    head = struct.pack(">hhih", 0, 9, correlation_id, len(client)) + client + b"\0"
    return head + body.getvalue()


async def _produce(broker: Broker, correlation_id: int) -> ProduceResponse:
    result = Dispatcher(broker)(memoryview(_produce_frame(correlation_id)), _Conn())  # type: ignore[arg-type]
    data = await asyncio.wait_for(result, 10)
    assert int.from_bytes(data[4:8], "big") == correlation_id
    response, _ = entity_reader(ProduceResponse)(memoryview(data), 9)
    assert isinstance(response, ProduceResponse)
    return response


def _accepted_offset(response: ProduceResponse) -> int:
    (topic,) = response.responses
    (part,) = topic.partition_responses
    assert part.error_code == ErrorCode.none, part
    return int(part.base_offset)


async def test_a_healthy_store_gives_no_produce_throttle(
    broker: tuple[Broker, _WatchedStore],
) -> None:
    b, _ = broker
    response = await _produce(b, 1)
    assert _accepted_offset(response) == 0
    assert response.throttle_time.total_seconds() == 0


async def test_a_degraded_store_throttles_produce_while_the_records_are_accepted(
    broker: tuple[Broker, _WatchedStore],
) -> None:
    b, store = broker
    assert await _produce(b, 1) is not None
    store.health.call("PutObject", 3.0, "SlowDown: gave up")
    assert store.health.degraded
    response = await _produce(b, 2)
    assert _accepted_offset(response) == 1
    throttle_ms = response.throttle_time.total_seconds() * 1000
    assert throttle_ms > 0
    assert throttle_ms == b.engine.backpressure_ms
    log = b.logs.partition(_TOPIC, 0)
    assert log is not None and log.high_watermark == 2
