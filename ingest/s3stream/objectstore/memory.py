"""An in-memory object store (tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ingest.s3stream.errors import ObjectExistsError, ObjectNotFoundError
from ingest.s3stream.objectstore.api import ObjectInfo

T = TypeVar("T")

__all__ = ["MemoryObjectStore"]


class MemoryObjectStore:
    """Objects in a dict; no durability. Optionally shared between instances."""

    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects: dict[str, bytes] = {} if objects is None else objects

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        if if_absent and key in self.objects:
            raise ObjectExistsError(f"object {key!r} exists")
        self.objects[key] = bytes(data)

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        try:
            data = self.objects[key]
        except KeyError:
            raise ObjectNotFoundError(f"no object {key!r}") from None
        return data[start:end] if start is not None or end is not None else data

    async def get_then(
        self,
        key: str,
        start: int | None,
        end: int | None,
        then: Callable[[bytes | memoryview], T],
    ) -> T:
        return then(await self.get(key, start, end))

    async def delete(self, keys: list[str]) -> None:
        for k in keys:
            self.objects.pop(k, None)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        return [
            ObjectInfo(k, len(v)) for k, v in sorted(self.objects.items()) if k.startswith(prefix)
        ]

    async def close(self) -> None:
        pass
