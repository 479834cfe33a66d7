"""The contracts of the S3Stream engine.

Everything above this module (the Kafka partition log) sees streams only: an
ordered, append-only sequence of opaque batches addressed by logical offsets.
Nothing above it knows about files, WAL segments or objects.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["StreamBatch", "Stream", "StreamEngine"]


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


class StreamEngine(Protocol):
    """Owns every stream of a broker: WAL, caches, uploads, recovery."""

    async def start(self) -> None:
        """Recover (WAL replay on top of the objects) and start background work."""

    async def create_stream(self) -> Stream: ...

    async def open_stream(self, stream_id: int) -> Stream: ...

    async def delete_stream(self, stream_id: int) -> None: ...

    async def close(self) -> None:
        """Stop background work; flush what the implementation promises to flush."""
