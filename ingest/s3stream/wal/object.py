"""A write-ahead log on object storage: batches of records written as objects.

No local state: every acknowledged record is in an object under ``prefix``,
so any broker pointed at the same store can recover another broker's
unflushed data. Ownership moves by recovery: the newest broker to recover a
prefix owns it. A broker it took over from (dead, or a zombie: paused,
partitioned, still running) acknowledges nothing more, and everything it did
acknowledge was recovered by its successor (see *Fencing*). So two brokers on
one prefix never both acknowledge appends.

Layout under ``prefix``:

- ``<epoch:020d>-<start:020d>.wal``: WAL objects. Each run of the log (from
  ``start`` to ``close`` or a crash) is an *epoch*, numbered above every
  epoch before it. An object holds the records of the epoch's bytes
  ``[start, start + size)`` (``start`` counts from 0 in each epoch) in the
  record format of :mod:`ingest.s3stream.wal.codec` (the file WAL's format);
  the next object starts where the previous one ends, so the key of an
  epoch's next object is always known.
- fences: 57-byte ``.wal`` objects (a magic line, the epoch of the broker
  that put them and a random nonce), put where a fenced epoch's next object
  would go.
- ``<epoch:020d>-<mark:020d>.trim``: empty *trim marks*. The epoch's objects
  below its newest mark were trimmed (their records are uploaded). Each
  epoch writes a mark at 0 when it starts. ``trim`` puts the new mark before
  it deletes anything.
- ``floor``: the oldest epoch that may still hold data. It is raised once
  ``trim`` has removed every object of the older epochs; those epochs are
  never replayed again.

Write path: ``append`` queues a record. A writer task gathers what is queued
for up to ``batch_interval_ms`` (or until ``batch_bytes``) and puts it as one
object, create-only (up to ``max_in_flight`` puts at once). The appends'
futures resolve strictly in position order, once every earlier object is in
too. WAL puts make one attempt per store call (the store's own retries, with
their backoff of seconds, would stall every later acknowledgement) and are
retried per :class:`~ingest.s3stream.objectstore.retry.WalPutPolicy`: at
once, then after 50-250 ms, backing off to seconds only while the store keeps
failing; a put not answered after ``hedge_after_s`` gets a second, identical
one (the same key and body, create-only: whichever lands, the other finds
the same bytes there, below). A put is retried until it succeeds or the log
is closed: while the store is down, acknowledgements stall (the engine then
applies backpressure) and nothing is dropped. A duplicate that lands after
its object was trimmed is below the epoch's newest mark: recovery deletes
it, like any object below the mark.

Fencing: a successor puts a fence, create-only, at the key where an epoch's
next object would go. Whichever of the two create-only puts lands first
wins the key:

- the fence: the old writer's put fails with ``ObjectExistsError``, and the
  log is fenced. That append and every later one fail with
  ``WalFencedError``; none is ever acknowledged (acknowledgements go in
  position order), and ``append`` refuses new ones. (A put that gets
  ``ObjectExistsError`` because an earlier attempt of it landed finds its own
  bytes there and succeeds.)
- the old writer's object: the successor reads it, recovers its records and
  tries the next key, until its fence lands.

So in every epoch, each acknowledged object lies before the fence, and the
successor recovered it. A key may be free because its object was trimmed:
the successor then finds a mark above it and goes on from that mark. A
fence below an epoch's newest mark ends nothing.

Recovery reads the floor and lists the prefix. First it reads every fence
(an object of exactly a fence's size that starts with the magic) of the
epochs at or above the floor: an epoch a fence names (a successor that may
not have put anything yet) is recovered too, and the new epoch is numbered
above all of them. Then, oldest epoch first, it goes through the floor epoch
and every epoch at or above it that is listed or named. For each, it reads
the contiguous run of objects from the epoch's newest mark (from its oldest
object for epochs written before marks existed). At the end of the run it
finds a fence (the epoch was fenced before and ends there) or puts its own,
as above; after putting one it lists the epoch again in case the writer
trimmed past that key meanwhile. A listed object that is gone when read was
trimmed, and is skipped. Objects after an epoch's end were never
acknowledged and are deleted, as are the objects and marks of epochs below
the floor. Fences are never deleted: a zombie of that epoch may still try to
put there. A corrupt object ends what is recovered of its epoch; the fence
still goes where the epoch's next object would.

Recoveries racing each other meet at those keys: the first fence to land
wins, and a recovery that finds another recovery's fence where it tried to
put its own raises ``WalFencedError``. An empty prefix (no floor, no WAL
objects) has no such key, so recovery there creates the floor, create-only,
naming its own epoch; a recovery that loses that race raises too. Recovered
records get fresh positions, consecutive over all recovered epochs; the new
epoch continues after them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ingest.errors import StorageError
from ingest.s3stream.errors import ObjectExistsError, ObjectNotFoundError, WalFencedError
from ingest.s3stream.objectstore.api import ObjectInfo, ObjectStore
from ingest.s3stream.objectstore.retry import WalPutPolicy, single_attempt
from ingest.s3stream.wal.api import OnDone, WalAppend, WalRecord, call_when_done
from ingest.s3stream.wal.codec import HEADER, encode_header, scan_records

__all__ = ["ObjectWriteAheadLog"]

log = logging.getLogger(__name__)

_SUFFIX = ".wal"
_MARK = ".trim"
_FLOOR = "floor"
_MAX_RECORD = 0x7FFFFFFF
_FENCE_MAGIC = b"TIDELAKE-WAL-FENCE\n"
_NONCE_HEX = 16
_FENCE_SIZE = len(_FENCE_MAGIC) + 20 + 1 + _NONCE_HEX + 1
_ATTEMPTS_PER_TRY = 3  # concurrent attempts of one WAL put (hedges, replacements)


def _fence_body(epoch: int, nonce: str) -> bytes:
    return _FENCE_MAGIC + f"{epoch:020d} {nonce}\n".encode()


def _fenced_by(data: bytes) -> int | None:
    """The epoch a fence object names; ``None`` if ``data`` is not a fence."""
    if len(data) != _FENCE_SIZE or not data.startswith(_FENCE_MAGIC):
        return None
    epoch = data[len(_FENCE_MAGIC) : len(_FENCE_MAGIC) + 20]
    return int(epoch) if epoch.isdigit() else None


@dataclass(slots=True)
class _EpochKeys:
    objects: dict[int, ObjectInfo] = field(default_factory=dict)  # start -> object or fence
    marks: dict[int, str] = field(default_factory=dict)  # trimmed up to -> mark key

    @property
    def mark(self) -> int | None:
        """Where the epoch's oldest untrimmed object starts, if it has marks."""
        return max(self.marks, default=None)


class _Claim(enum.Enum):
    LANDED = "our fence is in place"
    GONE = "an object was there but was deleted before it could be read"


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
    object holding it and every earlier object are stored (``put`` returned),
    and then a later ``recover`` of the prefix by any broker yields it; once a
    later recovery has fenced this log (see the module docstring) no append
    is acknowledged: they fail with ``WalFencedError``. ``close`` waits up to
    ``close_timeout_s`` for queued records to be put and fails the rest (they
    were never acknowledged).
    """

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "wal/",
        *,
        batch_interval_ms: float = 5.0,
        batch_bytes: int = 4 * 1024 * 1024,
        max_in_flight: int = 4,
        retry_initial_s: float = 0.25,
        retry_max_s: float = 5.0,
        close_timeout_s: float = 30.0,
        put_policy: WalPutPolicy | None = None,
    ) -> None:
        self._store = store
        self._policy = put_policy or WalPutPolicy(
            slow_initial_s=retry_initial_s, slow_max_s=retry_max_s
        )
        # WAL object puts (and their read-backs) retry on the policy's schedule
        self._put_store = store if self._policy.store_retries else single_attempt(store)
        self._prefix = prefix
        self._interval = batch_interval_ms / 1000
        self._batch_bytes = batch_bytes
        self._max_in_flight = max_in_flight
        self._close_timeout = close_timeout_s
        self._objects: deque[tuple[int, int, str]] = deque()  # (start, end, key) stored
        self._epoch = 0
        self._base = 0  # the position of this epoch's byte 0
        self._nonce = secrets.token_hex(_NONCE_HEX // 2)
        self._fence = b""  # this log's fence object (set by recover)
        self._fenced: str | None = None  # why, once a successor fenced this log
        self._floor = 0
        self._older_epochs = 0  # objects of earlier epochs still in ``_objects``
        self._marks: dict[int, list[str]] = {}  # epoch -> its trim marks this log knows
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
        self.put_hedges = 0  # second puts of a key whose first had not answered
        self._sleep = asyncio.sleep  # (tests record the waits)

    @property
    def next_position(self) -> int:
        return self._next_position

    @property
    def fenced(self) -> bool:
        """True once a later recovery took this log over: nothing more is acknowledged."""
        return self._fenced is not None

    def _epoch_key(self, epoch: int, start: int, suffix: str = _SUFFIX) -> str:
        return f"{self._prefix}{epoch:020d}-{start:020d}{suffix}"

    def _key(self, position: int) -> str:
        return self._epoch_key(self._epoch, position - self._base)

    def _parse_key(self, key: str) -> tuple[int, int, str] | None:
        """(epoch, start, suffix) of a WAL object or trim mark; None for other keys."""
        name = key[len(self._prefix) :]
        for suffix in (_SUFFIX, _MARK):
            if name.endswith(suffix):
                epoch_s, _, start_s = name.removesuffix(suffix).partition("-")
                if epoch_s.isdigit() and start_s.isdigit():
                    return int(epoch_s), int(start_s), suffix
        return None

    # --- recovery --------------------------------------------------------------
    async def _read_floor(self) -> int | None:
        try:
            return int((await self._store.get(self._prefix + _FLOOR)).decode() or 0)
        except ObjectNotFoundError:
            return None

    async def _list_epochs(self, prefix: str) -> dict[int, _EpochKeys]:
        epochs: dict[int, _EpochKeys] = {}
        for info in await self._store.list(prefix):
            parsed = self._parse_key(info.key)
            if parsed is None:
                continue
            keys = epochs.setdefault(parsed[0], _EpochKeys())
            if parsed[2] == _MARK:
                keys.marks[parsed[1]] = info.key
            else:
                keys.objects[parsed[1]] = info
        return epochs

    async def recover(self) -> AsyncIterator[WalRecord]:
        """Yield every record of each epoch's contiguous run of WAL objects,
        oldest epoch first, with positions renumbered consecutively, fencing
        every recovered epoch; ``WalFencedError`` if a concurrent recovery of
        the prefix got there first."""
        if self._started:
            raise StorageError("recover() must run before start()")
        floor = await self._read_floor()
        self._floor = floor or 0
        listed = await self._list_epochs(self._prefix)
        stale: list[str] = []
        newest = max([self._floor, *listed])
        for epoch in [e for e in listed if e < self._floor]:
            keys = listed.pop(epoch)
            stale.extend(keys.marks.values())
            for info in keys.objects.values():
                if info.size != _FENCE_SIZE:  # (fences stay: their zombies may still put)
                    stale.append(info.key)  # landed after its data was recovered and trimmed
        # The fences first: the epochs they name are recovered (and fenced) too,
        # and the new epoch goes above them.
        fences: dict[str, int] = {}  # key -> the epoch that fenced there
        small: dict[str, bytes] = {}  # fence-sized objects that are not fences
        for keys in listed.values():
            for info in keys.objects.values():
                if info.size != _FENCE_SIZE:
                    continue
                try:
                    data = await self._store.get(info.key)
                except ObjectNotFoundError:
                    continue  # trimmed since the listing
                by = _fenced_by(data)
                if by is None:
                    small[info.key] = data
                else:
                    fences[info.key] = by
                    newest = max(newest, by)
        self._epoch = max(time.time_ns(), newest + 1)
        self._fence = _fence_body(self._epoch, self._nonce)
        if floor is None and not listed:
            # an empty log: no epoch to fence, so the floor, created once, names the first owner
            try:
                await self._store.put(
                    self._prefix + _FLOOR, str(self._epoch).encode(), if_absent=True
                )
            except ObjectExistsError:
                raise WalFencedError("another broker is starting on this WAL prefix") from None
            self._floor = self._epoch
        todo = set(listed) | {e for e in fences.values() if e >= self._floor}
        if self._floor:
            todo.add(self._floor)
        todo.discard(self._epoch)
        self._objects = deque()
        self._next_position = 0
        for epoch in sorted(todo):
            keys = listed.setdefault(epoch, _EpochKeys())
            async for r in self._recover_epoch(epoch, keys, fences, small, stale):
                yield r
        if stale:
            await self._store.delete(stale)
        self._marks = {e: list(k.marks.values()) for e, k in listed.items()}
        # this epoch's first mark: from now on its newest mark is where a successor starts
        first = self._epoch_key(self._epoch, 0, _MARK)
        await self._store.put(first, b"")
        self._marks[self._epoch] = [first]
        self._older_epochs = len(self._objects)
        self._recovered = True

    async def _recover_epoch(
        self,
        epoch: int,
        keys: _EpochKeys,
        fences: dict[str, int],
        small: dict[str, bytes],
        stale: list[str],
    ) -> AsyncIterator[WalRecord]:
        """Yield the records of the epoch's contiguous run of objects from its
        newest trim mark (appending them to ``_objects``) and make sure a fence
        ends the run."""
        walked: set[str] = set()
        broken = False  # a corrupt object: what follows it is not recovered
        mark = keys.mark
        if mark is not None:
            expect = mark
        else:  # an epoch of an older release (no marks): from its oldest object
            expect = min(keys.objects, default=0)
        while True:
            key = self._epoch_key(epoch, expect)
            info = keys.objects.get(expect)
            if info is not None:
                walked.add(key)
                if key in fences:
                    break  # fenced by an earlier recovery
                data = small.get(key)
                if data is None:
                    try:
                        data = await self._store.get(key)
                    except ObjectNotFoundError:  # trimmed since the listing: uploaded
                        expect += info.size
                        continue
            else:
                claim = await self._claim(key)
                if isinstance(claim, _Claim):
                    # Had the epoch's writer put, acknowledged and trimmed this
                    # object since the listing, its mark is above the key by now.
                    fresh = (await self._list_epochs(f"{self._prefix}{epoch:020d}-")).get(epoch)
                    if fresh is not None:
                        keys.objects.update(fresh.objects)
                        keys.marks.update(fresh.marks)
                    mark = keys.mark
                    if mark is not None and mark > expect:
                        expect = mark  # (a fence we put below the mark is ignored)
                        continue
                    if claim is _Claim.LANDED:
                        log.info("fenced WAL epoch %d at %s", epoch, key)
                        break
                    continue  # deleted, but not trimmed: try again
                data = claim
                walked.add(key)
            by = _fenced_by(data)
            if by is not None:
                if data == self._fence:
                    break
                raise WalFencedError(
                    f"a concurrent recovery (epoch {by}) fenced WAL epoch {epoch} first"
                )
            if not data:
                log.warning("WAL epoch %d ends at empty object %s", epoch, key)
                stale.append(key)
                break
            records, valid, torn = scan_records(data, self._next_position, written_at=expect)
            if broken or torn or valid != len(data):
                if not broken:
                    log.warning("WAL epoch %d ends at corrupt object %s", epoch, key)
                broken = True
                stale.append(key)
            else:
                end = self._next_position + len(data)
                self._objects.append((self._next_position, end, key))
                self._next_position = end
                for r in records:
                    yield r
            expect += len(data)
        for info in keys.objects.values():
            if info.key in walked or info.key in fences:
                continue
            if info.size != _FENCE_SIZE or info.key in small:
                stale.append(info.key)  # trimmed, or after the epoch's end: never acknowledged

    async def _claim(self, key: str) -> _Claim | bytes:
        """Put this log's fence at ``key``, create-only. Returns
        ``_Claim.LANDED`` if it is there, else the object found in its place
        (``_Claim.GONE`` if it was deleted before it could be read)."""
        try:
            await self._store.put(key, self._fence, if_absent=True)
            return _Claim.LANDED
        except ObjectExistsError:
            pass
        try:
            data = await self._store.get(key)
        except ObjectNotFoundError:
            return _Claim.GONE
        return _Claim.LANDED if data == self._fence else data

    # --- appends ---------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        if not self._recovered:
            async for _ in self.recover():
                pass
        self._base = self._next_position
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(self._max_in_flight)
        self._wake = asyncio.Event()
        self._started = True
        self._writer = asyncio.create_task(self._run(), name="object-wal-writer")

    def append(
        self,
        stream_id: int,
        base_offset: int,
        count: int,
        payload: bytes | memoryview,
        on_done: OnDone | None = None,
    ) -> WalAppend:
        """Queue a record; ``done`` resolves once it is stored in an object."""
        if self._fenced is not None:
            raise WalFencedError(self._fenced)
        if not self._started or self._closing:
            raise StorageError("the WAL is not open")
        assert self._loop is not None and self._wake is not None
        length = len(payload)
        if length > _MAX_RECORD - HEADER.size:
            raise StorageError(f"record of {length} bytes is too large for the WAL")
        size = HEADER.size + length
        position = self._next_position
        # the CRC binds the position within the epoch, as the object keys name it;
        # encoded first, as it can fail: a position taken by no record would be a hole
        header = encode_header(stream_id, base_offset, count, payload, position - self._base)
        self._next_position = position + size
        future: asyncio.Future[None] = self._loop.create_future()
        if on_done is not None:
            call_when_done(future, on_done)
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
        while self._fenced is None:
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
            if self._fenced is not None or not self._queue:
                self._slots.release()
                continue
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
        try:
            if await self._put_object(put.key, body):
                self.puts += 1
                put.done = True
                self._complete_in_order()
        finally:
            self._slots.release()

    async def _put_object(self, key: str, body: bytes) -> bool:
        """Put ``body`` create-only, retrying failures; False once the log is fenced."""
        schedule = self._policy.schedule()
        started = time.monotonic()
        while self._fenced is None:
            try:
                return await self._hedged_put(key, body)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - retried until it lands
                self.put_retries += 1
                delay = schedule.next_delay(time.monotonic() - started)
                log.warning("WAL object put %s failed (%s); retrying in %.2f s", key, e, delay)
                await self._sleep(delay)
        return False

    async def _hedged_put(self, key: str, body: bytes) -> bool:
        """One try of the put: another identical put when no attempt has
        answered for ``hedge_after_s``, or when one failed while an earlier
        one is still unanswered (up to ``_ATTEMPTS_PER_TRY`` attempts). The
        first success wins (the rest are cancelled); it fails only if every
        attempt did."""
        hedge = self._policy.hedge_after_s
        if hedge is None:
            return await self._put_once(key, body)
        pending = {asyncio.ensure_future(self._put_once(key, body))}
        launched = 1
        error: BaseException | None = None
        try:
            while pending:
                more = launched < _ATTEMPTS_PER_TRY
                done, pending = await asyncio.wait(
                    pending, timeout=hedge if more else None, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    if task.exception() is None:
                        return task.result()
                    error = task.exception()
                if more and pending and self._fenced is None:
                    # unanswered (a slow request), or a failure next to one
                    if done:
                        self.put_retries += 1
                    else:
                        self.put_hedges += 1
                    pending.add(asyncio.ensure_future(self._put_once(key, body)))
                    launched += 1
        finally:
            for task in pending:
                task.cancel()
        assert error is not None
        raise error

    async def _put_once(self, key: str, body: bytes) -> bool:
        """One create-only put; True once ``body`` is at ``key`` (put now, or by
        an earlier or concurrent attempt of this put), False if a later
        recovery's fence is there (the log is fenced then)."""
        try:
            await self._put_store.put(key, body, if_absent=True)
            return True
        except ObjectExistsError:
            existing = await self._put_store.get(key)
            if existing == body:
                return True  # an earlier attempt of this put landed
            if self._fenced is None:
                self._fence_log(f"WAL object {key} was fenced by a later recovery")
            return False

    def _fence_log(self, reason: str) -> None:
        """A successor took the log over: fail every unacknowledged append, accept no more."""
        if self._fenced is not None:
            return
        self._fenced = reason
        log.error("%s: this broker no longer owns the WAL; appends fail from now on", reason)
        current = asyncio.current_task()
        for put in self._inflight:
            if put.task is not None and put.task is not current:
                put.task.cancel()
            for f in put.futures:
                if not f.done():
                    f.set_exception(WalFencedError(reason))
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(WalFencedError(reason))
        self._inflight.clear()
        self._queue = []
        self._queued_bytes = 0
        if self._wake is not None:
            self._wake.set()

    def _complete_in_order(self) -> None:
        while self._fenced is None and self._inflight and self._inflight[0].done:
            put = self._inflight.popleft()
            self._objects.append((put.start, put.end, put.key))
            for f in put.futures:
                if not f.done():
                    f.set_result(None)

    # --- trim and close ----------------------------------------------------------
    async def trim(self, upto_position: int) -> None:
        """Delete the objects whose records all lie below ``upto_position``.

        First the epoch's trim mark moves up to where its oldest remaining
        object starts, so a successor never takes a trimmed key for one that
        was never written. A fenced log deletes nothing: its successor owns
        the objects."""
        if self._fenced is not None:
            return
        doomed: list[tuple[int, int, str]] = []
        while self._objects and self._objects[0][1] <= upto_position:
            doomed.append(self._objects.popleft())
        if not doomed:
            return
        marks: dict[int, int] = {}
        for start, end, key in doomed:
            parsed = self._parse_key(key)
            assert parsed is not None
            marks[parsed[0]] = parsed[1] + end - start
        try:
            superseded: list[str] = []
            for epoch, mark in marks.items():
                mark_key = self._epoch_key(epoch, mark, _MARK)
                await self._store.put(mark_key, b"")
                superseded.extend(k for k in self._marks.get(epoch, []) if k != mark_key)
                self._marks[epoch] = [mark_key]
            await self._store.delete([k for _, _, k in doomed] + superseded)
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
