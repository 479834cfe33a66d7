"""The ObjectStore contract, run over every implementation (see the test modules)."""

from __future__ import annotations

import asyncio
import os

import pytest

from ingest.s3stream.errors import ObjectExistsError, ObjectNotFoundError
from ingest.s3stream.objectstore import ObjectInfo, ObjectStore


class ObjectStoreContract:
    """Subclass with a ``store`` fixture yielding a started, empty store."""

    async def test_put_then_get_returns_the_bytes(self, store: ObjectStore) -> None:
        await store.put("a/b/c", b"hello world")
        assert await store.get("a/b/c") == b"hello world"

    async def test_put_overwrites(self, store: ObjectStore) -> None:
        await store.put("k", b"one")
        await store.put("k", b"two!")
        assert await store.get("k") == b"two!"

    async def test_put_accepts_memoryview_and_bytearray(self, store: ObjectStore) -> None:
        await store.put("mv", memoryview(b"xyz"))
        await store.put("ba", bytearray(b"abc"))
        assert await store.get("mv") == b"xyz"
        assert await store.get("ba") == b"abc"

    async def test_ranged_get_is_end_exclusive_and_clamped(self, store: ObjectStore) -> None:
        await store.put("r", b"0123456789")
        assert await store.get("r", 2, 5) == b"234"
        assert await store.get("r", 7) == b"789"
        assert await store.get("r", None, 3) == b"012"
        assert await store.get("r", 8, 100) == b"89"
        assert await store.get("r", 4, 4) == b""

    async def test_get_missing_raises_object_not_found(self, store: ObjectStore) -> None:
        with pytest.raises(ObjectNotFoundError):
            await store.get("missing")

    async def test_delete_removes_and_ignores_missing(self, store: ObjectStore) -> None:
        await store.put("d1", b"1")
        await store.put("d2", b"2")
        await store.delete(["d1", "nope"])
        with pytest.raises(ObjectNotFoundError):
            await store.get("d1")
        assert await store.get("d2") == b"2"

    async def test_list_by_prefix_sorted_with_sizes(self, store: ObjectStore) -> None:
        await store.put("p/2", b"22")
        await store.put("p/1", b"1")
        await store.put("q/1", b"333")
        assert await store.list("p/") == [ObjectInfo("p/1", 1), ObjectInfo("p/2", 2)]
        assert [o.key for o in await store.list()] == ["p/1", "p/2", "q/1"]

    async def test_large_object_round_trip(self, store: ObjectStore) -> None:
        data = os.urandom(12 * 1024 * 1024 + 17)
        await store.put("big", data)
        assert await store.get("big") == data
        assert (
            await store.get("big", 5 * 1024 * 1024, 5 * 1024 * 1024 + 10)
            == data[5 * 1024 * 1024 : 5 * 1024 * 1024 + 10]
        )

    async def test_large_memoryview_put_stores_exactly_the_view(self, store: ObjectStore) -> None:
        # a view into a bigger buffer (as uploads and compaction pass them),
        # multipart on S3, whose parts are read from the view without a copy
        backing = bytearray(os.urandom(13 * 1024 * 1024))
        view = memoryview(backing)[1000 : 1000 + 12 * 1024 * 1024 + 17]
        await store.put("big-view", view)
        await store.put("small-view", view[:1000])
        assert await store.get("big-view") == bytes(view)
        assert await store.get("small-view") == bytes(view[:1000])

    async def test_create_only_put_stores_a_new_key(self, store: ObjectStore) -> None:
        await store.put("c/new", memoryview(b"first"), if_absent=True)
        assert await store.get("c/new") == b"first"

    async def test_create_only_put_refuses_an_existing_key(self, store: ObjectStore) -> None:
        await store.put("c/k", b"first")
        with pytest.raises(ObjectExistsError):
            await store.put("c/k", b"second", if_absent=True)
        assert await store.get("c/k") == b"first"
        assert await store.list("c/") == [ObjectInfo("c/k", 5)]

    async def test_create_only_put_of_a_large_object_refuses_an_existing_key(
        self, store: ObjectStore
    ) -> None:
        data = os.urandom(12 * 1024 * 1024 + 17)  # multipart on S3
        await store.put("c/big", data, if_absent=True)
        with pytest.raises(ObjectExistsError):
            await store.put("c/big", os.urandom(12 * 1024 * 1024), if_absent=True)
        assert await store.get("c/big") == data

    async def test_concurrent_create_only_puts_of_one_key_let_exactly_one_win(
        self, store: ObjectStore
    ) -> None:
        results = await asyncio.gather(
            *(store.put("c/race", b"writer %d" % i, if_absent=True) for i in range(8)),
            return_exceptions=True,
        )
        winners = [i for i, r in enumerate(results) if r is None]
        assert len(winners) == 1, results
        assert all(isinstance(r, ObjectExistsError) for r in results if r is not None)
        assert await store.get("c/race") == b"writer %d" % winners[0]

    async def test_get_then_applies_the_function_to_the_ranges_bytes(
        self, store: ObjectStore
    ) -> None:
        data = os.urandom(3 * 1024 * 1024 + 5)  # large enough for pooled reads
        await store.put("t/obj", data)
        assert await store.get_then("t/obj", None, None, bytes) == data
        assert await store.get_then("t/obj", 7, 2 * 1024 * 1024, bytes) == data[7 : 2 * 1024 * 1024]
        assert await store.get_then("t/obj", 5, 5, bytes) == b""
        assert await store.get_then("t/obj", len(data) - 3, None, len) == 3

    async def test_get_then_of_a_missing_key_raises_object_not_found(
        self, store: ObjectStore
    ) -> None:
        with pytest.raises(ObjectNotFoundError):
            await store.get_then("missing", None, None, bytes)

    async def test_get_then_errors_of_the_function_reach_the_caller(
        self, store: ObjectStore
    ) -> None:
        await store.put("t/x", b"abc")

        def refuse(data: bytes | memoryview) -> int:
            raise ValueError(bytes(data).decode())

        with pytest.raises(ValueError, match="abc"):
            await store.get_then("t/x", None, None, refuse)

    async def test_views_handed_to_get_then_keep_their_bytes(self, store: ObjectStore) -> None:
        # a store may read into recycled buffers: what a caller keeps must
        # not change under it when later reads come in
        blobs = [os.urandom(2 * 1024 * 1024 + i) for i in range(6)]
        for i, b in enumerate(blobs):
            await store.put(f"v/{i}", b)
        kept: list[memoryview] = []
        for i in range(3):
            kept.append(await store.get_then(f"v/{i}", None, None, lambda d: memoryview(d)))
        for _ in range(3):
            for i in range(6):
                assert await store.get_then(f"v/{i}", None, None, bytes) == blobs[i]
        assert [bytes(v) for v in kept] == blobs[:3]
