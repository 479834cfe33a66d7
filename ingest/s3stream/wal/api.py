"""The write-ahead log contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

__all__ = ["WalAppend", "WalRecord", "WriteAheadLog"]


@dataclass(frozen=True, slots=True)
class WalRecord:
    """One record read back by recovery; ``[position, end_position)`` in the log."""

    stream_id: int
    base_offset: int
    count: int
    payload: bytes | memoryview
    position: int
    end_position: int

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.count


@dataclass(frozen=True, slots=True)
class WalAppend:
    """The handle of one append.

    ``position`` and ``end_position`` are assigned synchronously by ``append``;
    ``done`` resolves (to ``None``) once the record is durable (fsync'd), or
    fails with a ``StorageError`` if it could not be written.
    """

    position: int
    end_position: int
    done: asyncio.Future[None]


class WriteAheadLog(Protocol):
    """A durable, ordered log of stream records.

    Guarantees:
    - Records get increasing positions in the order ``append`` is called and
      become durable in that order (a record is never durable before one
      appended earlier).
    - ``WalAppend.done`` resolves only after the record is fsync'd: it then
      survives a crash (kill -9 or power loss on honest disks).
    - ``recover`` yields every intact record in position order and stops at
      the first torn or corrupt one, discarding it and everything after it.
      It must be called (and drained) before ``start`` if records matter.
    - ``trim(upto)`` lets the log delete records wholly below ``upto``; it may
      keep more (whole segments are deleted).
    """

    def recover(self) -> AsyncIterator[WalRecord]: ...

    async def start(self) -> None: ...

    @property
    def next_position(self) -> int: ...

    def append(
        self, stream_id: int, base_offset: int, count: int, payload: bytes | memoryview
    ) -> WalAppend: ...

    async def trim(self, upto_position: int) -> None: ...

    async def close(self) -> None: ...
