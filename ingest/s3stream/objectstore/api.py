"""The object store contract: put, ranged get, delete, list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ObjectInfo", "ObjectStore"]


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int


class ObjectStore(Protocol):
    """Flat key -> bytes storage (a directory, S3, or memory).

    Guarantees:
    - ``put`` is atomic and durable once it returns: readers see the whole
      object or nothing, and a returned put survives a crash.
    - ``get(key, start, end)`` returns bytes ``[start, end)`` (``end``
      exclusive, clamped to the object's size); ``None`` means "from the
      beginning" / "to the end". Raises ``ObjectNotFoundError`` for a missing key.
    - ``delete`` ignores keys that do not exist.
    - ``list(prefix)`` returns every object whose key starts with ``prefix``,
      sorted by key.
    """

    async def put(self, key: str, data: bytes | bytearray | memoryview) -> None: ...

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes: ...

    async def delete(self, keys: list[str]) -> None: ...

    async def list(self, prefix: str = "") -> list[ObjectInfo]: ...

    async def close(self) -> None: ...
