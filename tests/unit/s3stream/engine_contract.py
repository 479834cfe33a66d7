"""The StreamEngine contract, run over every implementation (see the test modules)."""

from __future__ import annotations

import asyncio

import pytest

from ingest.s3stream.api import StreamEngine
from ingest.s3stream.errors import OffsetOutOfRangeError, UnknownStreamError


class StreamEngineContract:
    """Subclass with an ``engine`` fixture yielding a started engine."""

    async def test_append_assigns_offsets_synchronously_and_in_order(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        assert (s.start_offset, s.next_offset, s.confirm_offset) == (0, 0, 0)
        a = s.append(b"a", 3)
        assert s.next_offset == 3
        b = s.append(b"b", 2)
        assert s.next_offset == 5
        assert await asyncio.gather(a, b) == [0, 3]
        assert s.confirm_offset == 5

    async def test_fetch_returns_whole_batches_containing_start(self, engine: StreamEngine) -> None:
        s = await engine.create_stream()
        for i in range(5):
            await s.append(bytes([i]) * 10, 10)
        got = await s.fetch(15, 50, 10_000)
        assert [(b.base_offset, b.count) for b in got] == [(10, 10), (20, 10), (30, 10), (40, 10)]
        assert bytes(got[0].payload) == b"\x01" * 10
        assert all(b.stream_id == s.stream_id for b in got)

    async def test_fetch_returns_at_least_one_batch_over_max_bytes(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        await s.append(b"x" * 100, 1)
        await s.append(b"y" * 100, 1)
        got = await s.fetch(0, 2, 1)
        assert [b.base_offset for b in got] == [0]
        got = await s.fetch(0, 2, 150)
        assert [b.base_offset for b in got] == [0]
        got = await s.fetch(0, 2, 200)
        assert [b.base_offset for b in got] == [0, 1]

    async def test_fetch_at_confirm_offset_is_empty_and_beyond_is_out_of_range(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        await s.append(b"x", 1)
        assert await s.fetch(1, 10, 100) == []
        with pytest.raises(OffsetOutOfRangeError):
            await s.fetch(2, 10, 100)

    async def test_payload_bytes_are_kept_exactly_and_buffers_are_copied(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        buf = bytearray(b"original")
        await s.append(buf, 1)
        buf[:] = b"mutated!"
        await s.append(memoryview(b"view"), 1)
        got = await s.fetch(0, 2, 1000)
        assert [bytes(b.payload) for b in got] == [b"original", b"view"]

    async def test_trim_moves_start_and_hides_older_offsets(self, engine: StreamEngine) -> None:
        s = await engine.create_stream()
        for _ in range(4):
            await s.append(b"z" * 10, 5)
        await s.trim(12)
        assert s.start_offset == 12
        await s.trim(3)  # never backwards
        assert s.start_offset == 12
        with pytest.raises(OffsetOutOfRangeError):
            await s.fetch(4, 20, 1000)
        got = await s.fetch(12, 20, 1000)
        assert [b.base_offset for b in got] == [10, 15]
        with pytest.raises(OffsetOutOfRangeError):
            await s.trim(21)

    async def test_streams_are_independent(self, engine: StreamEngine) -> None:
        s1 = await engine.create_stream()
        s2 = await engine.create_stream()
        assert s1.stream_id != s2.stream_id
        await s1.append(b"one", 1)
        await s2.append(b"two", 7)
        await s1.append(b"three", 1)
        assert [bytes(b.payload) for b in await s1.fetch(0, 10, 100)] == [b"one", b"three"]
        assert [bytes(b.payload) for b in await s2.fetch(0, 10, 100)] == [b"two"]
        assert s2.next_offset == 7

    async def test_open_stream_returns_the_stream_and_unknown_raises(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        await s.append(b"q", 1)
        again = await engine.open_stream(s.stream_id)
        assert again.next_offset == 1
        with pytest.raises(UnknownStreamError):
            await engine.open_stream(10_000)

    async def test_deleted_stream_cannot_be_opened(self, engine: StreamEngine) -> None:
        s = await engine.create_stream()
        await s.append(b"q", 1)
        await engine.delete_stream(s.stream_id)
        with pytest.raises(UnknownStreamError):
            await engine.open_stream(s.stream_id)

    async def test_many_concurrent_appends_are_all_readable_in_order(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        futs = [s.append(i.to_bytes(4, "big") * 50, 2) for i in range(300)]
        assert await asyncio.gather(*futs) == [2 * i for i in range(300)]
        got = []
        pos = 0
        while pos < s.confirm_offset:
            batch = await s.fetch(pos, s.confirm_offset, 4096)
            got.extend(batch)
            pos = batch[-1].end_offset
        assert [bytes(b.payload) for b in got] == [i.to_bytes(4, "big") * 50 for i in range(300)]
