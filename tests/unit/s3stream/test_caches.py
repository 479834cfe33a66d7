"""The log cache and the block cache."""

from __future__ import annotations

import asyncio

import pytest

from ingest.s3stream.api import StreamBatch
from ingest.s3stream.cache import BlockCache, LogCache


def _put(cache: LogCache, sid: int, base: int, size: int, wal: int, count: int = 1) -> None:
    cache.put(StreamBatch(sid, base, count, b"x" * size), wal)


def test_log_cache_serves_the_batch_containing_start() -> None:
    c = LogCache(1 << 20)
    for i in range(5):
        _put(c, 1, i * 10, 100, i, count=10)
    got = c.get(1, 25, 100, 10_000)
    assert [b.base_offset for b in got] == [20, 30, 40]
    assert [b.base_offset for b in c.get(1, 25, 31, 10_000)] == [20, 30]
    assert [b.base_offset for b in c.get(1, 25, 100, 150)] == [20]  # max_bytes, at least one
    assert c.get(1, 50, 100, 1000) == []
    assert c.get(2, 0, 100, 1000) == []


def test_log_cache_never_evicts_unuploaded_entries() -> None:
    c = LogCache(1000)
    for i in range(10):
        _put(c, 1, i, 300, i)
    assert c.evict() == 0
    assert c.size == 3000 and c.unuploaded_bytes == 3000 and c.over_budget
    c.mark_uploaded(1, 5)
    assert c.unuploaded_bytes == 1500
    c.evict()
    assert c.size <= 1500 + 300 and c.size >= 1500
    assert c.get(1, 0, 10, 10_000) == []  # evicted oldest first
    assert c.first_offset(1) is not None and c.first_offset(1) >= 3  # type: ignore[operator]
    assert [b.base_offset for b in c.get(1, 5, 10, 10_000)] == [5, 6, 7, 8, 9]


def test_log_cache_eviction_is_global_in_upload_order() -> None:
    c = LogCache(1000)
    _put(c, 1, 0, 400, 0)
    _put(c, 2, 0, 400, 1)
    _put(c, 1, 1, 400, 2)
    c.mark_uploaded(2, 1)
    c.mark_uploaded(1, 2)
    c.evict()
    assert c.get(2, 0, 1, 1000) == []
    assert [b.base_offset for b in c.get(1, 0, 2, 1000)] == [0, 1]


def test_log_cache_pending_and_min_wal_position() -> None:
    c = LogCache(1 << 20)
    _put(c, 1, 0, 10, 100)
    _put(c, 2, 0, 10, 50)
    _put(c, 1, 1, 10, 200)
    assert c.min_unuploaded_wal_position() == 50
    assert [e.batch.base_offset for e in c.pending(1, below=2)] == [0, 1]
    assert [e.batch.base_offset for e in c.pending(1, below=1)] == [0]
    assert [e.batch.base_offset for e in c.pending(1, below=2, max_bytes=5)] == [0]
    c.mark_uploaded(2, 1)
    assert c.min_unuploaded_wal_position() == 100
    assert sorted(c.streams_with_pending()) == [1]
    c.mark_uploaded(1, 2)
    assert c.min_unuploaded_wal_position() is None


def test_log_cache_trim_and_drop_stream() -> None:
    c = LogCache(1 << 20)
    for i in range(4):
        _put(c, 1, i, 10, i)
    c.mark_uploaded(1, 2)
    c.trim(1, 3)  # only uploaded entries go
    assert c.first_offset(1) == 2
    c.drop_stream(1)
    assert c.size == 0 and c.unuploaded_bytes == 0


def test_log_cache_compacts_after_many_evictions() -> None:
    c = LogCache(1000)
    for i in range(2000):
        _put(c, 1, i, 10, i)
        c.mark_uploaded(1, i + 1)
        c.evict()
    assert [b.base_offset for b in c.get(1, 1990, 2000, 10_000)] == list(range(1990, 2000))
    assert c.size <= 1000


async def test_block_cache_hits_after_first_load_and_bounds_bytes() -> None:
    c = BlockCache(250)
    loads = 0

    def loader(data: bytes):  # type: ignore[no-untyped-def]
        async def load() -> bytes:
            nonlocal loads
            loads += 1
            return data

        return load

    assert await c.get("k", 0, 100, loader(b"a" * 100)) == b"a" * 100
    assert await c.get("k", 0, 100, loader(b"z")) == b"a" * 100
    assert loads == 1 and c.hits == 1
    await c.get("k", 100, 200, loader(b"b" * 100))
    await c.get("k", 0, 100, loader(b"z"))  # touch: k/0 is now most recent
    await c.get("k", 200, 300, loader(b"c" * 100))  # evicts k/100
    assert c.size == 200
    assert await c.get("k", 100, 200, loader(b"B" * 100)) == b"B" * 100
    c.invalidate("k")
    assert c.size == 0


async def test_block_cache_shares_concurrent_loads() -> None:
    c = BlockCache(1000)
    calls = 0
    gate = asyncio.Event()

    async def load() -> bytes:
        nonlocal calls
        calls += 1
        await gate.wait()
        return b"data"

    t1 = asyncio.ensure_future(c.get("k", 0, 4, load))
    t2 = asyncio.ensure_future(c.get("k", 0, 4, load))
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(t1, t2) == [b"data", b"data"]
    assert calls == 1


async def test_block_cache_does_not_cache_failures() -> None:
    c = BlockCache(1000)

    async def boom() -> bytes:
        raise OSError("nope")

    with pytest.raises(OSError):
        await c.get("k", 0, 4, boom)

    async def ok() -> bytes:
        return b"fine"

    assert await c.get("k", 0, 4, ok) == b"fine"


def test_log_cache_picked_entries_are_not_pending_until_unpicked() -> None:
    c = LogCache(1 << 20)
    for i in range(4):
        _put(c, 1, i, 10, i)
    c.mark_picked(1, 2)
    assert [e.batch.base_offset for e in c.pending(1, below=4)] == [2, 3]
    assert c.min_unuploaded_wal_position() == 0  # picked is not uploaded
    c.unpick_all()
    assert [e.batch.base_offset for e in c.pending(1, below=4)] == [0, 1, 2, 3]
    c.mark_picked(1, 4)
    assert c.streams_with_pending() == []
    c.mark_uploaded(1, 2)
    assert c.min_unuploaded_wal_position() == 2
    c.unpick_all()
    assert [e.batch.base_offset for e in c.pending(1, below=4)] == [2, 3]
