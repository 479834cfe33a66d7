"""The write-ahead log contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["WalAppend", "WalRecord", "WriteAheadLog", "OnDone", "call_when_done"]

# Told once of an append's outcome: None once it is durable, else the error.
OnDone = Callable[[BaseException | None], None]


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
    - ``on_done``, when given to ``append``, is called once, on the event
      loop, with None when ``done`` succeeds or with the error it fails with,
      and no later than ``done``'s own callbacks (the file WAL calls it in
      the loop iteration that learns of the fsync, in append order: a
      listener there saves the iteration a future's callback waits for).
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
        self,
        stream_id: int,
        base_offset: int,
        count: int,
        payload: bytes | memoryview,
        on_done: OnDone | None = None,
    ) -> WalAppend: ...

    async def trim(self, upto_position: int) -> None: ...

    async def close(self) -> None: ...


def call_when_done(future: asyncio.Future[None], on_done: OnDone) -> None:
    """``on_done`` as a callback of ``future`` (for a WAL that resolves its
    futures and has no quicker way to tell)."""

    def done(f: asyncio.Future[None]) -> None:
        on_done(asyncio.CancelledError() if f.cancelled() else f.exception())

    future.add_done_callback(done)
