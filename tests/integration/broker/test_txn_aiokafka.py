"""aiokafka transactions: AIOKafkaProducer(transactional_id=...) commits and
aborts (``producer.transaction()`` and the explicit calls), read_committed
consumers see exactly the committed records in order and nothing of an open
transaction, read_uncommitted consumers see all, a consume-transform-produce
loop moves its group's offsets only on commit, and a second producer with the
same transactional id fences the first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced

from tests.integration.broker.conftest import RECENT_TS, create_topic, unique
from tests.support.platform import TidelakeProcess


class _Aborted(Exception):
    """Raised inside ``producer.transaction()`` to make it abort."""


async def _txn_producer(tidelake: TidelakeProcess, transactional_id: str) -> AIOKafkaProducer:
    p = AIOKafkaProducer(
        bootstrap_servers=tidelake.bootstrap,
        transactional_id=transactional_id,
        enable_idempotence=True,
        transaction_timeout_ms=60_000,
        request_timeout_ms=15_000,
    )
    await p.start()
    return p


async def _send(
    p: AIOKafkaProducer, topic: str, values: Iterable[str], partitions: int = 2
) -> None:
    futures = []
    for v in values:
        i = int(v.split("-")[1])
        futures.append(
            await p.send(
                topic,
                key=v.encode(),
                value=v.encode(),
                partition=i % partitions,
                timestamp_ms=RECENT_TS + i,
            )
        )
    await asyncio.gather(*futures)


async def _read(
    tidelake: TidelakeProcess,
    topic: str,
    isolation_level: str,
    expect: int,
    partitions: int = 2,
    settle_s: float = 0.5,
) -> dict[int, list[str]]:
    """Everything a fresh consumer reads from the start of each partition:
    it stops ``settle_s`` after the ``expect``-th record (and a Fetch answer
    for every partition), so that a record too many is seen too."""
    c = AIOKafkaConsumer(
        bootstrap_servers=tidelake.bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await c.start()
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        got: dict[int, list[str]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 30
        done_at: float | None = None
        while time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                got[tp.partition] += [m.value.decode() for m in msgs if m.value is not None]
            n = sum(len(v) for v in got.values())
            fetched = all(c.highwater(tp) is not None for tp in c.assignment())
            if n >= expect and fetched and done_at is None:
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at > settle_s:
                break
        assert all(c.highwater(tp) is not None for tp in c.assignment()), "no Fetch answer"
        return got
    finally:
        await c.stop()


def _by_partition(values: Iterable[str], partitions: int = 2) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    for v in values:
        out[int(v.split("-")[1]) % partitions].append(v)
    return out


async def test_read_committed_sees_exactly_the_committed_records_in_order(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("aio-txn")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    p = await _txn_producer(tidelake, unique("aio-tid"))
    try:
        async with p.transaction():
            await _send(p, topic, [f"c-{i}" for i in range(0, 6)])
        with pytest.raises(_Aborted):
            async with p.transaction():
                await _send(p, topic, [f"a-{i}" for i in range(6, 12)])
                raise _Aborted
        # the explicit calls, too
        await p.begin_transaction()
        await _send(p, topic, [f"a-{i}" for i in range(12, 14)])
        await p.abort_transaction()
        await p.begin_transaction()
        await _send(p, topic, [f"c-{i}" for i in range(14, 20)])
        await p.commit_transaction()
    finally:
        await p.stop()

    committed = [f"c-{i}" for i in [*range(0, 6), *range(14, 20)]]
    assert await _read(tidelake, topic, "read_committed", len(committed)) == _by_partition(
        committed
    )
    everything = [*(f"c-{i}" for i in range(6)), *(f"a-{i}" for i in range(6, 14))]
    everything += [f"c-{i}" for i in range(14, 20)]
    assert await _read(tidelake, topic, "read_uncommitted", len(everything)) == _by_partition(
        everything
    )


async def _stable_offsets(tidelake: TidelakeProcess, topic: str) -> tuple[int, int, int]:
    """What a read_committed consumer learns of partition 0's end: its end
    offset (ListOffsets), and from a Fetch the last stable offset and the
    high watermark."""
    c = AIOKafkaConsumer(
        bootstrap_servers=tidelake.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        deadline = time.monotonic() + 10
        while c.highwater(tp) is None and time.monotonic() < deadline:
            await c.getmany(tp, timeout_ms=200)  # until a Fetch answered
        return end, c.last_stable_offset(tp), c.highwater(tp)
    finally:
        await c.stop()


async def test_an_open_transaction_holds_read_committed_back_until_it_ends(
    tidelake: TidelakeProcess,
) -> None:
    """The last stable offset: a read_committed consumer sees nothing from the
    first offset of the earliest open transaction on, even records of another
    producer's transaction that committed meanwhile."""
    topic = unique("aio-open")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    first = await _txn_producer(tidelake, unique("aio-tid"))
    second = await _txn_producer(tidelake, unique("aio-tid"))
    try:
        await first.begin_transaction()
        await second.begin_transaction()
        for p, v in [(first, "f-0"), (second, "s-1"), (first, "f-2"), (second, "s-3")]:
            await p.send_and_wait(topic, value=v.encode(), partition=0)  # one batch each
        await second.commit_transaction()  # its marker: offset 4
        assert await _read(tidelake, topic, "read_committed", 0, partitions=1) == {0: []}
        assert await _stable_offsets(tidelake, topic) == (0, 0, 5)
        assert await _read(tidelake, topic, "read_uncommitted", 4, partitions=1) == {
            0: ["f-0", "s-1", "f-2", "s-3"]
        }
        await first.commit_transaction()
    finally:
        await first.stop()
        await second.stop()
    assert await _read(tidelake, topic, "read_committed", 4, partitions=1) == {
        0: ["f-0", "s-1", "f-2", "s-3"]
    }
    assert await _stable_offsets(tidelake, topic) == (6, 6, 6)


async def test_consume_transform_produce_moves_the_group_offsets_only_on_commit(
    tidelake: TidelakeProcess,
) -> None:
    src, dst, group = unique("aio-in"), unique("aio-out"), unique("aio-ctp")
    create_topic(tidelake.bootstrap, src, partitions=1)
    create_topic(tidelake.bootstrap, dst, partitions=1)
    plain = AIOKafkaProducer(bootstrap_servers=tidelake.bootstrap, acks="all")
    await plain.start()
    try:
        for i in range(30):
            await plain.send(src, value=str(i).encode(), partition=0)
        await plain.flush()
    finally:
        await plain.stop()

    tp = TopicPartition(src, 0)
    consumer = AIOKafkaConsumer(
        src,
        bootstrap_servers=tidelake.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    producer = await _txn_producer(tidelake, unique("aio-ctp-tid"))
    try:
        batches = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records = (await consumer.getmany(tp, timeout_ms=500, max_records=7)).get(tp, [])
            if not records:
                if tp in consumer.assignment() and await consumer.position(tp) == 30:
                    break
                continue
            before = await consumer.committed(tp)
            next_offset = records[-1].offset + 1
            await producer.begin_transaction()
            for m in records:
                await producer.send(dst, value=b"x" + m.value, partition=0)
            await producer.send_offsets_to_transaction({tp: next_offset}, group)
            await producer.flush()  # so that an aborted batch is in the log too
            batches += 1
            if batches % 2 == 0:
                # every second batch is aborted, then read again from the
                # group's committed offset, as a restarted loop would
                await producer.abort_transaction()
                assert await consumer.committed(tp) == before
                consumer.seek(tp, before if before is not None else 0)
            else:
                await producer.commit_transaction()
                assert await consumer.committed(tp) == next_offset
        assert await consumer.position(tp) == 30
        assert batches >= 4  # at least two aborted
    finally:
        await producer.stop()
        await consumer.stop()

    out = await _read(tidelake, dst, "read_committed", 30, partitions=1)
    assert out == {0: [f"x{i}" for i in range(30)]}
    # the aborted copies are there for read_uncommitted, committed ones once
    dirty = (await _read(tidelake, dst, "read_uncommitted", 31, partitions=1))[0]
    assert len(dirty) > 30 and sorted(set(dirty)) == sorted(out[0])


async def _fence(tidelake: TidelakeProcess, topic: str, tid: str) -> AIOKafkaProducer:
    """A producer (returned) with records of an open transaction, fenced by a
    second producer with its transactional id, which commits records of its own."""
    zombie = await _txn_producer(tidelake, tid)
    await zombie.begin_transaction()
    await _send(zombie, topic, ["z-0", "z-1"], partitions=1)
    successor = await _txn_producer(tidelake, tid)  # aborts the zombie's transaction
    try:
        async with successor.transaction():
            await _send(successor, topic, ["s-2", "s-3"], partitions=1)
    finally:
        await successor.stop()
    return zombie


async def test_a_second_producer_fences_the_first_at_its_next_commit(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("aio-fence")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    zombie = await _fence(tidelake, topic, unique("aio-fence-tid"))
    try:
        with pytest.raises(ProducerFenced):
            await asyncio.wait_for(zombie.commit_transaction(), 20)
    finally:
        await zombie.stop()
    assert await _read(tidelake, topic, "read_committed", 2, partitions=1) == {0: ["s-2", "s-3"]}


async def test_a_fenced_producer_cannot_write_into_the_partition_again(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("aio-fence-send")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    zombie = await _fence(tidelake, topic, unique("aio-fence-tid"))
    try:
        # Kafka answers a stale epoch on Produce with INVALID_PRODUCER_EPOCH;
        # aiokafka reports it as ProducerFenced, and so does the abort after it.
        with pytest.raises(ProducerFenced):
            await asyncio.wait_for((await zombie.send(topic, value=b"z-4", partition=0)), 20)
        with pytest.raises(ProducerFenced):
            await asyncio.wait_for(zombie.abort_transaction(), 20)
    finally:
        await zombie.stop()
    assert await _read(tidelake, topic, "read_committed", 2, partitions=1) == {0: ["s-2", "s-3"]}
    # the zombie's first records are in the log, aborted; its last one is not
    dirty = await _read(tidelake, topic, "read_uncommitted", 4, partitions=1)
    assert dirty == {0: ["z-0", "z-1", "s-2", "s-3"]}
