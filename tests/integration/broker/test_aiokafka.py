"""aiokafka: AIOKafkaProducer and AIOKafkaConsumer round trip through a group."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.integration.broker.conftest import RECENT_TS, create_topic, unique
from tests.support.platform import TidelakeProcess


async def test_producer_and_group_consumer_round_trip_and_commit(
    tidelake: TidelakeProcess,
) -> None:
    topic, group = unique("aio"), unique("aio-g")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    producer = AIOKafkaProducer(
        bootstrap_servers=tidelake.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        sent = []
        for i in range(60):
            meta = await producer.send_and_wait(
                topic,
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                partition=i % 2,
                headers=[("i", str(i).encode())],
                timestamp_ms=RECENT_TS + i,
            )
            sent.append((meta.partition, meta.offset, i))
        batch = producer.create_batch()
        for i in range(60, 70):
            batch.append(key=None, value=f"v{i}".encode(), timestamp=None)
        fut = await producer.send_batch(batch, topic, partition=0)
        meta = await fut
        assert meta.offset == 30
    finally:
        await producer.stop()
    assert [o for p, o, _i in sent if p == 0] == list(range(30))

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=tidelake.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    try:
        got = []

        async def read_all() -> None:
            async for m in consumer:
                got.append(m)
                if len(got) == 70:
                    return

        await asyncio.wait_for(read_all(), 30)
        await consumer.commit()
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert await consumer.committed(tp0) == 40
        assert await consumer.committed(tp1) == 30
    finally:
        await consumer.stop()
    for m in got:
        if m.key is not None:
            i = int(m.key[1:])
            assert (m.partition, m.value, m.headers, m.timestamp) == (
                i % 2,
                f"v{i}".encode(),
                (("i", str(i).encode()),),
                RECENT_TS + i,
            )
    assert [m.offset for m in got if m.partition == 0] == list(range(40))
    assert [m.value for m in got if m.partition == 0][30:] == [
        f"v{i}".encode() for i in range(60, 70)
    ]
