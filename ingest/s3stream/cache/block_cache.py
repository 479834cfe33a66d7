"""The block cache: an LRU of object byte ranges read from object storage.

Keys are ``(object_key, start, end)``; values are what was read there (bytes,
or a parsed form such as :class:`~ingest.s3stream.objects.StreamRange`),
sized by ``len()``. Bounded in bytes; a single value larger than the budget is
returned but not kept.
Concurrent misses for the same range share one load. Event loop only.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sized
from typing import Generic, TypeVar

__all__ = ["BlockCache"]

_Key = tuple[str, int, int]
V = TypeVar("V", bound=Sized)


class BlockCache(Generic[V]):
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[_Key, V] = OrderedDict()
        self._loading: dict[_Key, asyncio.Future[V]] = {}
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._bytes

    @property
    def capacity(self) -> int:
        return self._capacity

    def contains(self, key: str, start: int, end: int) -> bool:
        """Whether ``[start, end)`` of ``key`` is cached or being loaded."""
        k = (key, start, end)
        return k in self._entries or k in self._loading

    async def get(self, key: str, start: int, end: int, load: Callable[[], Awaitable[V]]) -> V:
        """The bytes ``[start, end)`` of object ``key``, from cache or ``load()``."""
        k = (key, start, end)
        data = self._entries.get(k)
        if data is not None:
            self._entries.move_to_end(k)
            self.hits += 1
            return data
        inflight = self._loading.get(k)
        if inflight is not None:
            return await asyncio.shield(inflight)
        self.misses += 1
        fut: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._loading[k] = fut
        try:
            data = await load()
        except Exception as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved
            raise
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._loading.pop(k, None)
        fut.set_result(data)
        self._insert(k, data)
        return data

    def _insert(self, k: _Key, data: V) -> None:
        if len(data) > self._capacity:
            return
        old = self._entries.pop(k, None)
        if old is not None:
            self._bytes -= len(old)
        self._entries[k] = data
        self._bytes += len(data)
        while self._bytes > self._capacity:
            _, v = self._entries.popitem(last=False)
            self._bytes -= len(v)

    def clear(self) -> None:
        """Forget every range (the memory is released once readers drop theirs)."""
        self._entries.clear()
        self._bytes = 0

    def invalidate(self, key: str) -> None:
        """Forget every range of ``key`` (the object was deleted)."""
        for k in [k for k in self._entries if k[0] == key]:
            self._bytes -= len(self._entries.pop(k))
