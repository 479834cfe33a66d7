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
