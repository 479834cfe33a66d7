"""The object store contract: put, ranged get, delete, list."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["ObjectInfo", "ObjectStore"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int


class ObjectStore(Protocol):
    """Flat key -> bytes storage (a directory, S3, or memory).

    Guarantees:
    - ``put`` is atomic and durable once it returns: readers see the whole
      object or nothing, and a returned put survives a crash.
    - ``put(..., if_absent=True)`` is create-only: it stores the object only if
      no object has that key, atomically (of two such puts of one key at most
      one succeeds), and otherwise raises ``ObjectExistsError`` leaving the
      existing object untouched. A put whose first attempt landed but whose
      answer was lost may be retried by the client library and then also raise
      ``ObjectExistsError``: callers that must tell the two apart read the
      object back and compare.
    - ``get(key, start, end)`` returns bytes ``[start, end)`` (``end``
      exclusive, clamped to the object's size); ``None`` means "from the
      beginning" / "to the end". Raises ``ObjectNotFoundError`` for a missing key.
    - ``get_then(key, start, end, then)`` returns ``then(data)`` for those
      bytes, calling ``then`` where the bytes were read (an I/O thread, if the
      store has them) while they are still in the CPU's caches: checksums and
      parsing of fresh reads cost less there and stay off the event loop.
      ``data`` is bytes or a memoryview that stays valid while referenced.
    - ``delete`` ignores keys that do not exist.
    - ``list(prefix)`` returns every object whose key starts with ``prefix``,
      sorted by key.
    """

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None: ...

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes: ...

    async def get_then(
        self,
        key: str,
        start: int | None,
        end: int | None,
        then: Callable[[bytes | memoryview], T],
    ) -> T: ...

    async def delete(self, keys: list[str]) -> None: ...

    async def list(self, prefix: str = "") -> list[ObjectInfo]: ...

    async def close(self) -> None: ...
