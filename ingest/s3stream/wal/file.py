"""A write-ahead log in segmented local files, with group commit.

Record layout (little endian), followed by ``length`` payload bytes::

    u32 length | u32 crc32c | i64 stream_id | i64 base_offset | i32 count

The CRC32C covers ``length, stream_id, base_offset, count``, the record's
position (not stored) and the payload (:mod:`~ingest.s3stream.wal.codec`).
Positions are logical byte offsets over the whole log; a segment file is
named by the position of its first record (``00000000000000000000.wal``).

Group commit: ``append`` only queues the record. One writer thread takes
everything queued, writes it with ``writev`` and calls ``fdatasync`` once,
then the appends' futures resolve on the event loop. Appends that arrive
while a write+fsync is in flight go into the next one. The writer thread is
the C one of :mod:`~ingest.s3stream.wal._groupcommit` where it is built
(it never takes the GIL, so it never waits for the loop thread's Python, nor
the loop for it; it tells the loop through an eventfd), else a Python thread
that does the same (``native=False`` chooses it; the tests run both).

Recycled segments: trim renames a segment it no longer needs to a spare
(``*.free``, up to ``recycled_segments`` of them) instead of deleting it, and
the next segment is that spare renamed back, its old bytes overwritten in
place. Deleting a 64 MiB file frees its blocks (and, on a filesystem mounted
with ``discard``, trims them) in a journal commit that every concurrent
``fdatasync`` waits for: measured on ext4, 20-50 ms produce stalls once per
segment. Overwriting blocks that are allocated and written changes no
metadata, so those ``fdatasync`` calls do not join a journal commit at all.
The records' CRC covers their position (:mod:`~ingest.s3stream.wal.codec`),
so a recycled segment's stale bytes after its last record read as the end of
the segment, never as records; recovery accepts that end when the next
segment starts exactly there.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ingest.errors import StorageError
from ingest.s3stream.latency import LatencyHistogram
from ingest.s3stream.wal.api import OnDone, ReplySent, WalAppend, WalRecord, call_when_done
from ingest.s3stream.wal.codec import HEADER, RECORD_HEADER_SIZE, scan_records
from ingest.s3stream.wal.codec import encode_header as _encode_header

__all__ = ["FileWriteAheadLog", "RECORD_HEADER_SIZE", "NATIVE"]

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ingest.s3stream.wal._groupcommit import GroupCommit

_native: ModuleType | None
try:
    from ingest.s3stream.wal import _groupcommit as _native
except ImportError:  # not built: the Python writer thread
    _native = None

NATIVE = _native is not None
# group commits the C writer keeps in flight at once (``sync_depth=None``)
SYNC_DEPTH = 2

_HEADER = HEADER
_SUFFIX = ".wal"
_SPARE_SUFFIX = ".free"
_PREFILL_STEP = 256 * 1024  # as in _groupcommit.c
_PREFILL_ZEROS = bytes(_PREFILL_STEP)
_IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024))
_MAX_RECORD = 0x7FFFFFFF


def _segment_name(start: int) -> str:
    return f"{start:020d}{_SUFFIX}"


@dataclass(slots=True)
class _Pending:
    position: int
    new_segment: bool
    header: bytes
    payload: bytes | memoryview
    future: asyncio.Future[None]


class FileWriteAheadLog:
    """:class:`~ingest.s3stream.wal.api.WriteAheadLog` on local segment files.

    ``segment_bytes`` is the size at which a new segment starts (a record never
    spans segments; a record larger than it gets a segment of its own).
    ``recycled_segments`` trimmed segments are kept as spares for new ones
    (0 deletes them at once); they cost up to that many segments of disk.
    ``prefill_bytes``: an idle writer keeps the active segment written (with
    zeros) that far ahead of its last record, so that a record's fdatasync
    does not also commit a new file size (0: off; see ``_groupcommit.c``).
    ``native`` picks the C writer thread (``None``: wherever it is built).
    ``sync_depth``: the C writer's threads, so that many group commits can be
    in flight at once, each reported durable after those before it (``None``:
    ``SYNC_DEPTH``; 1: one at a time; the Python writer is always 1).
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        segment_bytes: int = 64 * 1024 * 1024,
        recycled_segments: int = 2,
        prefill_bytes: int = 1 << 20,
        native: bool | None = None,
        sync_depth: int | None = None,
        writer_replies: bool = True,
    ) -> None:
        if native and _native is None:
            raise StorageError("the C WAL writer (ingest.s3stream.wal._groupcommit) is not built")
        self._use_native = NATIVE if native is None else native
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._segment_bytes = segment_bytes
        self._max_spares = recycled_segments
        self._prefill = max(0, prefill_bytes)
        self._sync_depth = SYNC_DEPTH if sync_depth is None else sync_depth
        self._writer_replies = writer_replies  # the C writer sends replies (DurableReplies)
        if not 1 <= self._sync_depth <= 4:
            raise StorageError(f"WAL sync depth {self._sync_depth} is not 1 to 4")
        self._spares: list[Path] = []  # trimmed segment files to reuse, oldest first
        self._spare_lock = threading.Lock()  # the writer thread takes, trims give
        self._spare_seq = 0
        self._segments: list[int] = []  # start positions of the files on disk, sorted
        self._next_position = 0
        self._active_start = 0
        self._recovered = False
        self._started = False
        self._closing = False
        self._failed: BaseException | None = None
        self._cond = threading.Condition()
        self._pending: list[_Pending] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1  # the active segment (native: the last one handed to the writer)
        self._fd_start = -1
        self._writer: GroupCommit | None = None  # the C writer
        self._dir_fd = -1
        # native: in append order, with their listeners
        self._waiting: deque[tuple[asyncio.Future[None], OnDone | None]] = deque()
        self._finished = 0  # native: records the C writer reported finished
        self._kick_due = False  # native: the writer is woken at the end of this iteration
        # native: replies the writer sends, by token: (listener, length, socket fd)
        self._replies: dict[int, tuple[ReplySent, int, int]] = {}
        # the writer's replies by outcome: sent whole, partly (the rest left to
        # the loop), not at all (their records or the socket failed)
        self.replies_sent = {"whole": 0, "partly": 0, "not": 0}
        self._syncs = 0  # fdatasync calls issued by the Python writer (group commits)
        # per group commit: from the writer taking the queue to its fdatasync
        # returning (writev, segment roll and fdatasync)
        self.sync_latency = LatencyHistogram()
        self._lock_fd = -1

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def next_position(self) -> int:
        return self._next_position

    @property
    def native(self) -> bool:
        """Whether the C writer thread commits the groups."""
        return self._use_native

    @property
    def syncs(self) -> int:
        """Group commits (fdatasync calls) so far."""
        return int(self._writer.syncs) if self._writer is not None else self._syncs

    # --- recovery --------------------------------------------------------------
    def _list_segments(self) -> list[int]:
        out: list[int] = []
        for p in self._dir.iterdir():
            if p.name.endswith(_SUFFIX) and p.name[: -len(_SUFFIX)].isdigit():
                out.append(int(p.name[: -len(_SUFFIX)]))
        return sorted(out)

    def _scan_segment(self, start: int) -> tuple[list[WalRecord], int, bool]:
        """Read one segment: (intact records, valid length, torn?)."""
        path = self._dir / _segment_name(start)
        with open(path, "rb") as f:
            data = f.read()
        return scan_records(data, start)

    def _truncate(self, start: int, length: int) -> None:
        path = self._dir / _segment_name(start)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _sync_file(self, start: int) -> None:
        fd = os.open(self._dir / _segment_name(start), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _remove_segments(self, starts: list[int], *, recycle: bool = False) -> None:
        """Delete segments, or with ``recycle`` keep segment-sized ones as spares."""
        for s in starts:
            path = self._dir / _segment_name(s)
            if recycle and self._recycle(path):
                continue
            path.unlink(missing_ok=True)
        self._sync_dir()

    def _recycle(self, path: Path) -> bool:
        with self._spare_lock:
            if len(self._spares) >= self._max_spares:
                return False
            try:
                if path.stat().st_size > self._segment_bytes:
                    return False  # a record larger than a segment: not worth keeping
            except FileNotFoundError:
                return True
            self._spare_seq += 1
            spare = self._dir / f"{self._spare_seq:020d}{_SPARE_SUFFIX}"
            path.rename(spare)
            self._spares.append(spare)
            return True

    def _load_spares(self) -> None:
        """Take up the spares an earlier run left (deleting any beyond the limit)."""
        found = sorted(self._dir.glob(f"*{_SPARE_SUFFIX}"))
        keep, extra = found[: self._max_spares], found[self._max_spares :]
        for p in extra:
            p.unlink(missing_ok=True)
        with self._spare_lock:
            self._spares = keep
            self._spare_seq = max(
                (int(p.stem) for p in keep if p.stem.isdigit()), default=self._spare_seq
            )

    def _sync_dir(self) -> None:
        dfd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _acquire_dir_lock(self) -> None:
        """Own the directory: a second WAL on it (another process or the same
        one) would corrupt it. The kernel drops the lock when the process dies."""
        if self._lock_fd >= 0:
            return
        fd = os.open(self._dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(f"the WAL directory {self._dir} is in use by another WAL") from None
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    async def recover(self) -> AsyncIterator[WalRecord]:
        """Yield every intact record in order; truncate a torn tail.

        Reads one segment at a time in a worker thread. Records recovered here
        are fsync'd before they are yielded (they may have been written but not
        synced before the crash). Raises ``StorageError`` if another WAL holds
        the directory.
        """
        if self._started:
            raise StorageError("recover() must run before start()")
        self._acquire_dir_lock()
        await asyncio.to_thread(self._load_spares)
        segments = await asyncio.to_thread(self._list_segments)
        kept: list[int] = []
        position = segments[0] if segments else 0
        for i, start in enumerate(segments):
            if start != position and kept:
                log.warning(
                    "WAL hole before segment %d (expected %d); dropping the rest", start, position
                )
                await asyncio.to_thread(self._remove_segments, segments[i:])
                break
            records, valid, torn = await asyncio.to_thread(self._scan_segment, start)
            kept.append(start)
            position = start + valid
            if torn and i + 1 < len(segments) and segments[i + 1] == position:
                # the rest is a recycled segment's old bytes: the log goes on
                # in the next segment, which starts right here
                torn = False
            if torn:
                log.warning("WAL torn at position %d; truncating", position)
                await asyncio.to_thread(self._truncate, start, valid)
                await asyncio.to_thread(self._remove_segments, segments[i + 1 :])
            else:
                await asyncio.to_thread(self._sync_file, start)
            for r in records:
                yield r
            if torn:
                break
        self._segments = kept
        self._next_position = position
        self._active_start = kept[-1] if kept else position
        self._recovered = True

    # --- appends ---------------------------------------------------------------
    async def start(self) -> None:
        """Open the active segment and start the writer thread."""
        if self._started:
            return
        if not self._recovered:
            async for _ in self.recover():
                pass
        self._loop = asyncio.get_running_loop()
        if not self._segments:
            self._segments.append(self._active_start)
        await asyncio.to_thread(self._open_segment, self._active_start)
        self._started = True
        if self._use_native:
            assert _native is not None
            self._dir_fd = os.open(self._dir, os.O_RDONLY)
            self._writer = _native.GroupCommit(
                self._fd,
                self._dir_fd,
                prefill=self._prefill,
                limit=self._segment_bytes,
                depth=self._sync_depth,
            )
            self._loop.add_reader(self._writer.eventfd, self._on_completed)
            return
        self._thread = threading.Thread(
            target=self._run, name=f"wal-writer:{self._dir}", daemon=True
        )
        self._thread.start()

    def append(
        self,
        stream_id: int,
        base_offset: int,
        count: int,
        payload: bytes | memoryview,
        on_done: OnDone | None = None,
    ) -> WalAppend:
        """Queue a record; the returned ``done`` future resolves once it is fsync'd.

        ``payload`` must not be mutated until ``done`` resolves.
        """
        if not self._started or self._closing:
            raise StorageError("the WAL is not open")
        if self._failed is not None:
            raise StorageError(f"the WAL failed earlier: {self._failed}")
        assert self._loop is not None
        length = len(payload)
        if length > _MAX_RECORD - _HEADER.size:
            raise StorageError(f"record of {length} bytes is too large for the WAL")
        size = _HEADER.size + length
        position = self._next_position
        # first, as it can fail: a position taken by no record would be a hole
        header = _encode_header(stream_id, base_offset, count, payload, position)
        new_segment = (
            position > self._active_start
            and position - self._active_start + size > self._segment_bytes
        )
        new_fd = -1
        if new_segment and self._writer is not None:
            try:  # a rename or an open: the C writer syncs the directory
                new_fd = self._segment_fd(position)
            except OSError as e:
                raise StorageError(f"cannot open a new WAL segment: {e}") from e
        if new_segment:
            self._active_start = position
            self._segments.append(position)
        self._next_position = position + size
        future: asyncio.Future[None] = self._loop.create_future()
        if self._writer is not None:
            self._writer.submit(header, payload, new_fd)
            self._waiting.append((future, on_done))
            if not self._kick_due:  # the writer starts once this loop iteration is done
                self._kick_due = True
                self._loop.call_soon(self._kick)
            if new_fd >= 0:
                self._fd, self._fd_start = new_fd, position
            return WalAppend(position, position + size, future)
        if on_done is not None:
            call_when_done(future, on_done)
        with self._cond:
            self._pending.append(_Pending(position, new_segment, header, payload, future))
            if len(self._pending) == 1:
                self._cond.notify()
        return WalAppend(position, position + size, future)

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: ReplySent, first: bool = True
    ) -> int | None:
        """See :class:`~ingest.s3stream.wal.api.DurableReplies`: the C
        writer sends ``data`` after the fdatasync that makes every record
        appended so far durable. None with the Python writer, or when the
        log failed."""
        if self._writer is None or self._failed is not None or not self._writer_replies:
            return None
        token = self._writer.reply_after(fd, data, first)
        if token is not None:
            self._replies[token] = (on_sent, len(data), fd)
        return token

    def cancel_reply(self, token: int) -> bool:
        if self._writer is None or not self._writer.cancel_reply(token):
            return False
        # the later replies on its socket went with it (tokens grow in order)
        _, _, fd = self._replies.pop(token, (None, 0, -1))
        for later in [t for t, (_, _, f) in self._replies.items() if f == fd and t > token]:
            del self._replies[later]
        return True

    def sync_now(self) -> None:
        """Wake the C writer for what is queued now, not at the end of this
        loop iteration: a reply waits for it (see ``DurableReplies``). A busy
        writer takes it after its sync, with whatever else comes meanwhile."""
        if self._writer is not None and self._kick_due:
            self._writer.kick()

    @property
    def replies_outstanding(self) -> bool:
        return bool(self._replies)

    def poll_durable(self) -> None:
        """Hear now of what the C writer finished (see ``DurableReplies``)."""
        if self._writer is not None and self._replies:
            self._on_completed()

    def _kick(self) -> None:
        self._kick_due = False
        if self._writer is not None:
            self._writer.kick()

    def _on_completed(self) -> None:
        """The C writer finished records: resolve their futures in order."""
        assert self._writer is not None
        done, good, errno, seconds = self._writer.completed()
        for took in seconds:
            self.sync_latency.observe(took)
        if errno and self._failed is None:
            self._failed = OSError(errno, os.strerror(errno))
            log.error("WAL write failed: %s", self._failed)
        waiting = self._waiting
        for i in range(self._finished, done):
            f, on_done = waiting.popleft()
            if f.done():  # not by this log: tell its listener all the same
                if on_done is not None:
                    on_done(asyncio.CancelledError() if f.cancelled() else f.exception())
                continue
            if i < good:
                f.set_result(None)
                if on_done is not None:
                    on_done(None)
            else:
                error = StorageError(f"WAL write failed: {self._failed}")
                f.set_exception(error)
                if on_done is not None:
                    on_done(error)
        self._finished = done
        if self._replies:  # after the records: their readers are woken first
            counts = self.replies_sent
            for token, sent, err in self._writer.replies():
                reply = self._replies.pop(token, None)
                if reply is None:
                    continue
                on_sent, length, _ = reply
                counts["whole" if sent == length else "partly" if sent or not err else "not"] += 1
                on_sent(sent, err)

    def _segment_fd(self, start: int) -> int:
        """An fd to append to the segment starting at ``start``: an existing
        one at its end, else a spare renamed to it (written from its first
        byte), else a new file. The directory is not synced here."""
        path = self._dir / _segment_name(start)
        spare: Path | None = None
        if not path.exists():
            with self._spare_lock:
                spare = self._spares.pop(0) if self._spares else None
        if spare is not None:
            spare.rename(path)
            return os.open(path, os.O_WRONLY)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.lseek(fd, 0, os.SEEK_END)
        return fd

    def _open_segment(self, start: int) -> None:
        """Make the segment starting at ``start`` the active one (see
        :meth:`_segment_fd`), its name durable."""
        fd = self._segment_fd(start)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self._fd_start = start
        self._sync_dir()

    def _writev_all(self, buffers: list[bytes | memoryview]) -> None:
        i = 0
        n = len(buffers)
        while i < n:
            chunk = buffers[i : i + _IOV_MAX]
            written = os.writev(self._fd, chunk)
            total = sum(len(b) for b in chunk)
            if written == total:
                i += len(chunk)
                continue
            # Partial write: skip whole buffers, then finish the split one.
            for b in chunk:
                if written >= len(b):
                    written -= len(b)
                    i += 1
                    continue
                rest = memoryview(b)[written:]
                while rest:
                    k = os.write(self._fd, rest)
                    rest = rest[k:]
                i += 1
                break

    def _write_batch(self, batch: list[_Pending]) -> None:
        buffers: list[bytes | memoryview] = []
        for p in batch:
            if p.new_segment:
                if buffers:
                    self._writev_all(buffers)
                    buffers = []
                os.fdatasync(self._fd)
                self._open_segment(p.position)
            buffers.append(p.header)
            buffers.append(p.payload)
        if buffers:
            self._writev_all(buffers)
        os.fdatasync(self._fd)
        self._syncs += 1

    def _prefill_step(self) -> bool:
        """One step of writing ahead in the active segment (the C writer's
        prefill, on the Python writer): True if it wrote one."""
        fd = self._fd
        try:
            target = min(os.lseek(fd, 0, os.SEEK_CUR) + self._prefill, self._segment_bytes)
            size = os.fstat(fd).st_size
            if size + _PREFILL_STEP > target:
                return False
            if os.pwrite(fd, _PREFILL_ZEROS, size) <= 0:  # short: the next step goes on
                raise OSError("the segment file takes no more bytes")
            os.fdatasync(fd)
        except OSError as e:
            log.warning("WAL prefill stopped: %s", e)
            self._prefill = 0
            return False
        return True

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    if self._prefill and self._failed is None:
                        self._cond.release()  # records queued meanwhile go first
                        try:
                            stepped = self._prefill_step()
                        finally:
                            self._cond.acquire()
                        if stepped or self._pending or self._closing:
                            continue  # a notify during the step was not waited for
                    self._cond.wait()
                batch = self._pending
                self._pending = []
                if not batch and self._closing:
                    return
            error: BaseException | None = None
            if self._failed is not None:
                error = self._failed
            else:
                try:
                    started = time.perf_counter()
                    self._write_batch(batch)
                    self.sync_latency.observe(time.perf_counter() - started)
                except OSError as e:  # disk full, I/O error: fence the log
                    log.error("WAL write failed: %s", e)
                    self._failed = e
                    error = e
            futures = [p.future for p in batch]
            try:
                loop.call_soon_threadsafe(_resolve, futures, error)
            except RuntimeError:  # the loop is closed
                return

    # --- trim and close ----------------------------------------------------------
    async def trim(self, upto_position: int) -> None:
        """Drop the segments whose records all lie below ``upto_position``
        (kept as spares for new segments, up to ``recycled_segments``)."""
        doomed: list[int] = []
        while len(self._segments) > 1 and self._segments[1] <= upto_position:
            doomed.append(self._segments.pop(0))
        if doomed:
            await asyncio.to_thread(self._remove_segments, doomed, recycle=True)

    async def close(self) -> None:
        """Write and fsync what is queued, then stop the writer thread."""
        if self._closing:
            return
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._writer is not None:
            await asyncio.to_thread(self._writer.close)
            assert self._loop is not None
            self._loop.remove_reader(self._writer.eventfd)
            self._on_completed()
            self._fd = self._writer.fd
            os.close(self._dir_fd)
            self._dir_fd = -1
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
            # Resolve callbacks scheduled by the writer's last batch.
            await asyncio.sleep(0)
        if self._fd >= 0:
            await asyncio.to_thread(self._cut_stale_tail)
            os.close(self._fd)
            self._fd = -1
        self._release_dir_lock()

    def _cut_stale_tail(self) -> None:
        """Cut a recycled active segment's old bytes after the last record, so
        that a clean restart finds no torn tail (once, at close)."""
        try:
            end = os.lseek(self._fd, 0, os.SEEK_CUR)
            if os.fstat(self._fd).st_size > end:
                os.ftruncate(self._fd, end)
                os.fsync(self._fd)
        except OSError as e:  # recovery reads the old bytes as the log's end anyway
            log.warning("could not cut the WAL's recycled tail: %s", e)


def _resolve(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for f in futures:
        if f.done():
            continue
        if error is None:
            f.set_result(None)
        else:
            f.set_exception(StorageError(f"WAL write failed: {error}"))
