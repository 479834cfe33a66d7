"""The contracts of the S3Stream engine.

Everything above this module (the Kafka partition log) sees streams only: an
ordered, append-only sequence of opaque batches addressed by logical offsets.
Nothing above it knows about files, WAL segments or objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ingest.s3stream.wal.api import ReplySent

__all__ = ["StreamBatch", "Stream", "StreamEngine", "BatchTransform", "RewriteStats"]


@dataclass(slots=True)
class StreamBatch:
    """One appended batch: ``count`` logical offsets starting at ``base_offset``.

    ``payload`` is opaque to the engine (for Kafka it is a record batch v2 whose
    header already carries ``base_offset``). Never changed once built: the log
    and block caches hand the same batches to every reader. (Not ``frozen``:
    a fetch builds one per batch it returns, and a frozen dataclass takes
    three times as long to build.)
    """

    stream_id: int
    base_offset: int
    count: int
    payload: bytes | memoryview

    @property
    def end_offset(self) -> int:
        """Exclusive end: the offset right after this batch."""
        return self.base_offset + self.count


BatchTransform = Callable[[list["StreamBatch"]], list["StreamBatch"]]
"""Rewrites a contiguous run of a stream's batches (see :meth:`Stream.rewrite`)."""


@dataclass(slots=True)
class RewriteStats:
    """What one :meth:`Stream.rewrite` did: batches and payload bytes it
    handed to the transform, and what the transform gave back."""

    batches_in: int = 0
    batches_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class Stream(Protocol):
    """An append-only stream of batches.

    Guarantees:
    - ``append`` assigns ``base_offset = next_offset`` synchronously, at call
      time, before it yields to the event loop; appends therefore complete in
      the order they were called.
    - The awaitable returned by ``append`` resolves (to the base offset) only
      once the batch is durable: fsync'd in the write-ahead log. An append whose
      awaitable resolved survives a crash (kill -9) of the process.
    - ``confirm_offset`` is the end of the durable prefix: every offset below it
      is acknowledged. Readers must not see offsets at or above it.
    - ``fetch`` returns whole batches in offset order; the first may begin
      before ``start_offset`` (it contains it); at least one batch is returned
      when one is available, even if it exceeds ``max_bytes``.
    - ``trim`` moves ``start_offset`` forward; trimmed data is eventually
      deleted from the WAL and object storage.
    """

    @property
    def stream_id(self) -> int: ...

    @property
    def start_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def confirm_offset(self) -> int: ...

    def append(self, payload: bytes | memoryview, count: int) -> Awaitable[int]: ...

    async def fetch(
        self, start_offset: int, end_offset: int, max_bytes: int
    ) -> list[StreamBatch]: ...

    async def trim(self, new_start_offset: int) -> None: ...

    @property
    def committed_end(self) -> int:
        """The end of the prefix that is in object storage (the in-memory
        engine: ``next_offset``); only offsets below it can be rewritten."""

    async def rewrite(
        self, start_offset: int, end_offset: int, transform: BatchTransform
    ) -> RewriteStats:
        """Replace the stored batches lying wholly inside
        ``[start_offset, min(end_offset, committed_end))`` by what
        ``transform`` makes of them (log compaction).

        ``transform`` is called with each contiguous run of those batches, in
        offset order, possibly from a worker thread, and must return batches
        of the same stream that again cover exactly the run's offsets
        (contiguous, same first base offset and same end; fewer, smaller or
        emptier batches), else ``ValueError`` and nothing changes. Offsets,
        ``next_offset`` and ``start_offset`` never move.

        Atomic: readers see the old batches or the new ones, never a mix
        within one ``fetch``; a crash leaves one or the other.
        """


class StreamEngine(Protocol):
    """Owns every stream of a broker: WAL, caches, uploads, recovery."""

    async def start(self) -> None:
        """Recover (WAL replay on top of the objects) and start background work."""

    async def create_stream(self) -> Stream: ...

    async def open_stream(self, stream_id: int) -> Stream: ...

    async def delete_stream(self, stream_id: int) -> None: ...

    @property
    def backpressure_ms(self) -> int:
        """The throttle time (ms) Produce responses should carry now: 0 while
        the engine keeps up, above 0 while object storage is degraded or
        uploads fall behind (appends are still accepted; the client is asked
        to slow down)."""

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: ReplySent, first: bool = True
    ) -> int | None:
        """Have ``data`` sent on the connected socket ``fd`` as soon as every
        append issued so far is durable, by whoever learns of it first (the
        file WAL's writer thread, right after its fsync); the token, or None
        when this engine cannot (the caller answers as usual). The contract
        is :class:`~ingest.s3stream.wal.api.DurableReplies`'."""

    def cancel_reply(self, token: int) -> bool:
        """Take back a reply of :meth:`reply_when_durable` still waiting
        (True: it is never sent); False once it is being sent."""

    def sync_now(self) -> None:
        """Start making the appends issued so far durable now rather than at
        the end of the loop iteration (a reply is about to wait for them)."""

    def poll_durable(self) -> None:
        """Hear now of the appends made durable so far, while replies of
        :meth:`reply_when_durable` are outstanding: a client that holds one
        may ask for the records before the loop heard of them; the broker
        calls this before it serves such a request."""

    async def close(self) -> None:
        """Stop background work; flush what the implementation promises to flush."""
