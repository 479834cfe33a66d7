"""A write-ahead log on object storage: batches of records written as objects.

No local state: every acknowledged record is in an object under ``prefix``,
so any broker pointed at the same store can recover another broker's
unflushed data (one writer per prefix at a time).

Layout: objects ``<prefix><epoch:020d>-<start:020d>.wal``. Each run of the
log (from ``start`` to ``close`` or a crash) is an *epoch*, numbered above
every epoch before it. An object holds the records of positions
``[start, start + size)`` in the record format of
:mod:`ingest.s3stream.wal.codec` (the file WAL's format); within an epoch
the next object starts where the previous one ends. ``<prefix>floor`` names
the oldest epoch that may still hold data: it is raised once ``trim`` has
removed every object of the older epochs, so a put of a dead process that
lands late (after its successor recovered) is ignored, never replayed.

Write path: ``append`` queues a record. A writer task gathers what is queued
for up to ``batch_interval_ms`` (or until ``batch_bytes``), puts it as one
object (up to ``max_in_flight`` puts at once) and resolves the appends'
futures strictly in position order once every earlier object is in too.
A failed put is retried with capped exponential backoff and jitter until it
succeeds or the log is closed: while the store is down acknowledgements
stall (the engine then applies backpressure), nothing is dropped.

Recovery lists the objects of the epochs at or above the floor, reads each
epoch's objects in order and stops that epoch at its first gap (an object
whose predecessor never landed was never acknowledged), deleting what lies
after the gap and below the floor. Recovered records get fresh positions,
consecutive over all recovered epochs; the new epoch continues after them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ingest.errors import StorageError
from ingest.s3stream.errors import ObjectNotFoundError
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.wal.api import WalAppend, WalRecord
from ingest.s3stream.wal.codec import HEADER, encode_header, scan_records

__all__ = ["ObjectWriteAheadLog"]

log = logging.getLogger(__name__)

_SUFFIX = ".wal"
_FLOOR = "floor"
_MAX_RECORD = 0x7FFFFFFF


@dataclass(slots=True)
class _Pending:
    position: int
    header: bytes
    payload: bytes | memoryview
    future: asyncio.Future[None]


@dataclass(slots=True)
class _Put:
    start: int
    end: int
    key: str
    futures: list[asyncio.Future[None]]
    task: asyncio.Task[None] | None = None
    done: bool = False


class ObjectWriteAheadLog:
    """:class:`~ingest.s3stream.wal.api.WriteAheadLog` on an :class:`ObjectStore`.

    Guarantees (beyond the protocol's): an append's ``done`` resolves once the
    object holding it and every earlier object are stored (``put`` returned);
    ``close`` waits up to ``close_timeout_s`` for queued records to be put and
    fails the rest (they were never acknowledged).
    """

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "wal/",
        *,
        batch_interval_ms: float = 5.0,
        batch_bytes: int = 4 * 1024 * 1024,
        max_in_flight: int = 4,
        retry_initial_s: float = 0.1,
        retry_max_s: float = 5.0,
        close_timeout_s: float = 30.0,
    ) -> None:
        self._store = store
        self._prefix = prefix
        self._interval = batch_interval_ms / 1000
        self._batch_bytes = batch_bytes
        self._max_in_flight = max_in_flight
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self._close_timeout = close_timeout_s
        self._objects: deque[tuple[int, int, str]] = deque()  # (start, end, key) stored
        self._epoch = 0
        self._floor = 0
        self._older_epochs = 0  # objects of earlier epochs still in ``_objects``
        self._next_position = 0
        self._recovered = False
        self._started = False
        self._closing = False
        self._queue: list[_Pending] = []
        self._queued_bytes = 0
        self._queued_since = 0.0
        self._inflight: deque[_Put] = deque()
        self._slots: asyncio.Semaphore | None = None
        self._wake: asyncio.Event | None = None
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.puts = 0  # objects put (tests, benchmarks)
        self.put_retries = 0

    @property
    def next_position(self) -> int:
        return self._next_position

    def _key(self, start: int) -> str:
        return f"{self._prefix}{self._epoch:020d}-{start:020d}{_SUFFIX}"

    # --- recovery --------------------------------------------------------------
    async def _read_floor(self) -> int:
        try:
            return int((await self._store.get(self._prefix + _FLOOR)).decode() or 0)
        except ObjectNotFoundError:
            return 0

    async def recover(self) -> AsyncIterator[WalRecord]:
        """Yield every record of each epoch's contiguous run of WAL objects,
        oldest epoch first, with positions renumbered consecutively."""
        if self._started:
            raise StorageError("recover() must run before start()")
        self._floor = await self._read_floor()
        epochs: dict[int, list[tuple[int, int, str]]] = {}
        stale: list[str] = []
        newest = self._floor
        for info in await self._store.list(self._prefix):
            name = info.key[len(self._prefix) :]
            epoch_s, _, start_s = name.removesuffix(_SUFFIX).partition("-")
            if not (name.endswith(_SUFFIX) and epoch_s.isdigit() and start_s.isdigit()):
                continue
            epoch = int(epoch_s)
            newest = max(newest, epoch)
            if epoch < self._floor:
                stale.append(info.key)  # landed after its data was recovered and trimmed
                continue
            epochs.setdefault(epoch, []).append((int(start_s), info.size, info.key))
        kept: deque[tuple[int, int, str]] = deque()
        position = 0  # the recovered records' new positions
        for epoch in sorted(epochs):
            listed = sorted(epochs[epoch])
            expect = listed[0][0]
            for i, (start, size, key) in enumerate(listed):
                data = await self._store.get(key) if start == expect else b""
                records, valid, torn = scan_records(data, position)
                if start != expect or torn or valid != size:
                    log.warning("WAL epoch %d ends at object %s (gap or corrupt)", epoch, key)
                    stale.extend(k for _, _, k in listed[i:])
                    break
                kept.append((position, position + size, key))
                position += size
                expect = start + size
                for r in records:
                    yield r
        if stale:
            await self._store.delete(stale)
        self._objects = kept
        self._older_epochs = len(kept)
        self._next_position = position
        self._epoch = max(time.time_ns(), newest + 1)
        self._recovered = True

    # --- appends ---------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        if not self._recovered:
            async for _ in self.recover():
                pass
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(self._max_in_flight)
        self._wake = asyncio.Event()
        self._started = True
        self._writer = asyncio.create_task(self._run(), name="object-wal-writer")

    def append(
        self, stream_id: int, base_offset: int, count: int, payload: bytes | memoryview
    ) -> WalAppend:
        """Queue a record; ``done`` resolves once it is stored in an object."""
        if not self._started or self._closing:
            raise StorageError("the WAL is not open")
        assert self._loop is not None and self._wake is not None
        length = len(payload)
        if length > _MAX_RECORD - HEADER.size:
            raise StorageError(f"record of {length} bytes is too large for the WAL")
        size = HEADER.size + length
        position = self._next_position
        self._next_position = position + size
        future: asyncio.Future[None] = self._loop.create_future()
        header = encode_header(stream_id, base_offset, count, payload)
        if not self._queue:
            self._queued_since = time.monotonic()
            self._wake.set()
        self._queue.append(_Pending(position, header, payload, future))
        self._queued_bytes += size
        if self._queued_bytes >= self._batch_bytes:
            self._wake.set()
        return WalAppend(position, position + size, future)

    async def _run(self) -> None:
        assert self._wake is not None and self._slots is not None
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = self._queued_since + self._interval - time.monotonic()
            if delay > 0 and self._queued_bytes < self._batch_bytes and not self._closing:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
                continue
            await self._slots.acquire()
            batch, self._queue = self._queue, []
            self._queued_bytes = 0
            start = batch[0].position
            end = batch[-1].position + len(batch[-1].header) + len(batch[-1].payload)
            buffers: list[bytes | memoryview] = []
            for p in batch:
                buffers.append(p.header)
                buffers.append(p.payload)
            put = _Put(start, end, self._key(start), [p.future for p in batch])
            self._inflight.append(put)
            put.task = asyncio.create_task(self._put(put, b"".join(buffers)))

    async def _put(self, put: _Put, body: bytes) -> None:
        assert self._slots is not None
        delay = self._retry_initial
        try:
            while True:
                try:
                    await self._store.put(put.key, body)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - retried until it lands
                    self.put_retries += 1
                    log.warning("WAL object put %s failed (%s); retrying", put.key, e)
                    await asyncio.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, self._retry_max)
            self.puts += 1
            put.done = True
            self._complete_in_order()
        finally:
            self._slots.release()

    def _complete_in_order(self) -> None:
        while self._inflight and self._inflight[0].done:
            put = self._inflight.popleft()
            self._objects.append((put.start, put.end, put.key))
            for f in put.futures:
                if not f.done():
                    f.set_result(None)

    # --- trim and close ----------------------------------------------------------
    async def trim(self, upto_position: int) -> None:
        """Delete the objects whose records all lie below ``upto_position``."""
        doomed: list[str] = []
        while self._objects and self._objects[0][1] <= upto_position:
            doomed.append(self._objects.popleft()[2])
        if not doomed:
            return
        try:
            await self._store.delete(doomed)
        except Exception:  # noqa: BLE001 - stale objects are replayed and skipped
            log.warning("could not delete %d trimmed WAL objects", len(doomed))
            return
        if self._older_epochs:
            self._older_epochs = max(0, self._older_epochs - len(doomed))
            if self._older_epochs == 0 and self._floor < self._epoch:
                # every earlier epoch's data is uploaded: ignore their stragglers
                await self._store.put(self._prefix + _FLOOR, str(self._epoch).encode())
                self._floor = self._epoch

    async def close(self) -> None:
        """Put what is queued (waiting up to ``close_timeout_s``), then stop;
        appends still unstored then fail with ``StorageError``."""
        if self._closing:
            return
        self._closing = True
        if self._writer is None:
            return
        assert self._wake is not None
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._drain()), self._close_timeout)
        except TimeoutError:
            log.error("WAL objects still unstored after %.0f s; giving up", self._close_timeout)
        self._writer.cancel()
        for put in list(self._inflight):
            if put.task is not None:
                put.task.cancel()
            for f in put.futures:
                if not f.done():
                    f.set_exception(StorageError("the WAL closed before the record was stored"))
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(StorageError("the WAL closed before the record was stored"))
        self._inflight.clear()
        self._queue = []

    async def _drain(self) -> None:
        assert self._writer is not None
        await self._writer
        tasks = [p.task for p in self._inflight if p.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
