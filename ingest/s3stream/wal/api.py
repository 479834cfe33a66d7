"""The write-ahead log contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "WalAppend",
    "WalRecord",
    "WriteAheadLog",
    "OnDone",
    "call_when_done",
    "DurableReplies",
    "ReplySent",
]

# Told once of an append's outcome: None once it is durable, else the error.
OnDone = Callable[[BaseException | None], None]

# Told once of a reply handed to ``DurableReplies.reply_when_durable``: the
# bytes the socket took (all of them, some: the rest is the caller's to
# write, or none) and the errno of why not all (0 if all, or the socket was
# full).
ReplySent = Callable[[int, int], None]


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


@runtime_checkable
class DurableReplies(Protocol):
    """A WAL whose writer sends a response itself once the records it
    answers are durable (the file WAL's C writer): the response leaves right
    after the fsync, not a turn of the event loop later.

    - ``reply_when_durable`` queues ``data`` for the connected socket ``fd``,
      to be sent once every record appended so far is durable; the token, or
      None when it cannot (they already are, or the log failed or closes):
      the caller answers as usual then.
    - A client may hold a reply before the loop has heard that its records
      are durable: ``poll_durable`` hears of it now (``on_done`` of every
      append made durable so far, ``on_sent`` of every reply sent), and the
      broker calls it before serving a request that may read them, while
      ``replies_outstanding``.
    - ``on_sent`` is called once, on the event loop, after the send (or once
      the records failed: nothing is sent then, and the errno is theirs).
    - ``sync_now`` starts the group commit of what is appended now rather
      than at the end of the loop iteration (a reply is about to wait for it).
    - A socket's replies go out in the order queued. Once one did not go
      out whole, the later ones are not sent (``on_sent`` with 0 and errno
      0: the caller writes them, after the rest of that one) until one is
      queued with ``first`` (none of the caller's earlier ones outstanding).
    - ``cancel_reply`` takes back a reply still waiting, and every later one
      on its socket (True: never sent, ``on_sent`` not called); False once
      it is being sent.
    - The caller writes nothing else to ``fd`` while a reply is outstanding
      and keeps the fd open until ``on_sent`` (or a cancel).
    """

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: ReplySent, first: bool = True
    ) -> int | None: ...

    def cancel_reply(self, token: int) -> bool: ...

    def sync_now(self) -> None: ...

    @property
    def replies_outstanding(self) -> bool: ...

    def poll_durable(self) -> None: ...


def call_when_done(future: asyncio.Future[None], on_done: OnDone) -> None:
    """``on_done`` as a callback of ``future`` (for a WAL that resolves its
    futures and has no quicker way to tell)."""

    def done(f: asyncio.Future[None]) -> None:
        on_done(asyncio.CancelledError() if f.cancelled() else f.exception())

    future.add_done_callback(done)
