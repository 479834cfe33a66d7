"""The tiered network rate limiter: shares, produce bypass, priority order."""

from __future__ import annotations

import asyncio
import time

from ingest.s3stream.network import NetworkRateLimiter, TrafficClass

SHARES = {
    TrafficClass.TAIL_READ: 1.0,
    TrafficClass.CATCH_UP_READ: 0.5,
    TrafficClass.COMPACTION: 0.5,
}


async def test_a_class_gets_its_share_of_the_rate() -> None:
    limiter = NetworkRateLimiter(2_000_000, SHARES)  # compaction: 1 MB/s, 1 MB burst
    t = time.monotonic()
    for _ in range(8):
        await limiter.acquire(TrafficClass.COMPACTION, 250_000)  # 2 MB in all
    elapsed = time.monotonic() - t
    assert 0.8 < elapsed < 2.0  # the burst, then 1 MB at 1 MB/s


async def test_produce_and_a_disabled_limiter_never_wait() -> None:
    limiter = NetworkRateLimiter(1_000, SHARES)
    t = time.monotonic()
    for _ in range(100):
        await limiter.acquire(TrafficClass.PRODUCE, 1_000_000)
    off = NetworkRateLimiter(0, SHARES)
    for _ in range(100):
        await off.acquire(TrafficClass.COMPACTION, 1_000_000)
    assert time.monotonic() - t < 0.1


async def test_a_waiting_tail_read_goes_before_a_waiting_compaction() -> None:
    limiter = NetworkRateLimiter(1_000_000, SHARES)
    await limiter.acquire(TrafficClass.TAIL_READ, 1_000_000)  # the total is used up
    order: list[str] = []

    async def go(kind: TrafficClass, name: str) -> None:
        await limiter.acquire(kind, 100_000)
        order.append(name)

    compaction = asyncio.create_task(go(TrafficClass.COMPACTION, "compaction"))
    await asyncio.sleep(0.01)
    tail = asyncio.create_task(go(TrafficClass.TAIL_READ, "tail"))
    await asyncio.wait_for(asyncio.gather(compaction, tail), 5)
    assert order == ["tail", "compaction"]


async def test_produce_makes_the_limiter_busy_and_quiet_produce_frees_it() -> None:
    # no total limit: only the busy cap (1 MB/s, catch-up share 0.5 -> 0.5 MB/s)
    limiter = NetworkRateLimiter(0, SHARES, busy_bytes_per_second=1_000_000, busy_window_s=0.3)
    t = time.monotonic()
    for _ in range(10):
        await limiter.acquire(TrafficClass.CATCH_UP_READ, 1_000_000)
    assert time.monotonic() - t < 0.1  # nothing produced: unlimited
    assert limiter.current_rate() == 0

    # while produce goes on, a catch-up read gets its share of the busy cap
    stop = asyncio.Event()

    async def produce() -> None:
        while not stop.is_set():
            limiter.note_produce(100)
            await asyncio.sleep(0.02)

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0)
    assert limiter.current_rate() == 1_000_000
    await limiter.acquire(TrafficClass.CATCH_UP_READ, 500_000)  # the burst of its share
    t = time.monotonic()
    await limiter.acquire(TrafficClass.CATCH_UP_READ, 400_000)  # 0.8 s at 0.5 MB/s
    assert time.monotonic() - t > 0.6
    stop.set()
    await producer

    # a read waiting when produce stops goes once produce has been quiet 0.3 s
    limiter.note_produce(100)
    t = time.monotonic()
    await asyncio.wait_for(limiter.acquire(TrafficClass.CATCH_UP_READ, 400_000), 5)
    assert 0.2 < time.monotonic() - t < 0.6
    assert limiter.bytes[TrafficClass.PRODUCE] >= 200


async def test_the_busy_cap_never_raises_a_configured_total() -> None:
    limiter = NetworkRateLimiter(1_000_000, SHARES, busy_bytes_per_second=5_000_000)
    limiter.note_produce(1)
    assert limiter.current_rate() == 1_000_000
    quiet = NetworkRateLimiter(2_000_000, SHARES, busy_bytes_per_second=500_000)
    assert quiet.current_rate() == 2_000_000  # nothing produced yet
    quiet.note_produce(1)
    assert quiet.current_rate() == 500_000


async def test_the_busy_cap_leaves_tail_reads_and_table_writes_alone() -> None:
    limiter = NetworkRateLimiter(0, SHARES, busy_bytes_per_second=1_000)
    limiter.note_produce(1)
    assert limiter.limits(TrafficClass.CATCH_UP_READ) and limiter.limits(TrafficClass.COMPACTION)
    assert not limiter.limits(TrafficClass.TAIL_READ)
    assert not limiter.limits(TrafficClass.TABLE_WRITE)
    assert not limiter.limits(TrafficClass.PRODUCE)
    await limiter.acquire(TrafficClass.CATCH_UP_READ, 10_000_000)  # deep in debt
    waiting = asyncio.create_task(limiter.acquire(TrafficClass.CATCH_UP_READ, 100))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    t = time.monotonic()
    for _ in range(10):  # not queued behind the capped read
        await limiter.acquire(TrafficClass.TABLE_WRITE, 1_000_000)
        await limiter.acquire(TrafficClass.TAIL_READ, 1_000_000)
    assert time.monotonic() - t < 0.1
    waiting.cancel()
    capped = NetworkRateLimiter(1_000, SHARES, busy_bytes_per_second=500)
    assert capped.limits(TrafficClass.TABLE_WRITE)  # a configured total caps every class
