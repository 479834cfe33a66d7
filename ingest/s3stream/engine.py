"""The S3Stream engine: WAL + log cache + stream (set) objects on object storage.

Write path: ``Stream.append`` assigns the offset, puts the batch in the log
cache and the WAL, and resolves once the WAL has made it durable (fsync'd
in the file WAL; stored as an object in the object WAL); each stream's
``confirm_offset`` advances over the contiguous durable prefix.

Upload path (one background task): when ``upload_size_bytes`` of durable data
is pending, or ``upload_interval_ms`` has passed, pending batches of every
stream are encoded into objects (about ``upload_size_bytes`` per upload: a
stream with ``stream_object_bytes`` or more in it gets a stream object of its
own, the rest share a stream set object), put to the object store (up to ``upload_parallelism`` at once) and
committed to the metadata store strictly in order (which advances each
stream's end_offset). Committed entries become evictable and the WAL is
trimmed below the oldest entry not yet committed. Between uploads the same
task deletes objects whose data is all trimmed (after trims: only the
trimmed streams' objects; a full listing every ``gc_interval_ms``) and
compacts (:mod:`ingest.s3stream.compact`).

Read path: the log cache first, then objects found through the metadata
store, read with ranged GETs through the block cache; each object read also
prefetches the stream's next ``read_ahead_ranges`` object ranges. Object
reads and compaction pass the network rate limiter
(:mod:`ingest.s3stream.network`); WAL writes and uploads never wait on it.

Recovery (``start``): the metadata store says where each stream's objects
end; WAL records at or above that point are replayed into the log cache (as
pending) and uploaded before ``start`` returns.

Crash guarantee: an append whose awaitable resolved is in the WAL (fsync'd)
or in a committed object, and the WAL is only trimmed below data committed
to objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from ingest.errors import CorruptDataError
from ingest.metadata.api import MetadataStore, ObjectRange, ObjectRecord, StreamRecord, Writer
from ingest.metadata.errors import WriterFencedError
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.api import StreamBatch
from ingest.s3stream.cache import BlockCache, CacheEntry, LogCache
from ingest.s3stream.compact import CompactionPolicy, Compactor
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.errors import (
    EngineClosedError,
    ObjectNotFoundError,
    OffsetOutOfRangeError,
    StreamBackpressureError,
    StreamFencedError,
    UnknownStreamError,
    WalFencedError,
)
from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objects.format import StreamRange, concat, encode
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.stream import S3Stream
from ingest.s3stream.wal.api import WriteAheadLog

__all__ = ["S3StreamEngine"]

log = logging.getLogger(__name__)

_RETRY_DELAY_S = 1.0
_MAX_RETRY_DELAY_S = 4.0
_CLOSE_UPLOAD_S = 15.0  # SIGTERM: keep retrying the final upload this long
_MIN_GC_GAP_S = 1.0  # after trims, collect garbage at most this often
_END = 1 << 62  # past any offset
_CLOSE_WAIT_S = 20.0  # close(): how long to wait for appends in flight


_STREAM_SET_SUFFIX = ".sso"
_STREAM_OBJECT_SUFFIX = ".so"
OBJECT_SUFFIXES = (_STREAM_SET_SUFFIX, _STREAM_OBJECT_SUFFIX)


def _build_object(ranges: list[list[StreamBatch]]) -> tuple[bytearray, list[ObjectRange]]:
    buffers, index = encode(ranges)
    body = concat(buffers)
    return body, [
        ObjectRange(e.stream_id, e.start_offset, e.end_offset, e.position, e.length) for e in index
    ]


class S3StreamEngine:
    """A :class:`~ingest.s3stream.api.StreamEngine` on a WAL and an object store.

    The engine owns ``wal`` (it starts and closes it). ``metadata`` and
    ``objects`` are shared: the caller closes them after :meth:`close`.
    Use from one event loop.
    """

    def __init__(
        self,
        config: S3StreamConfig,
        metadata: MetadataStore,
        objects: ObjectStore,
        wal: WriteAheadLog,
        rate_limiter: NetworkRateLimiter | None = None,
    ) -> None:
        self._config = config
        self._limiter = rate_limiter or NetworkRateLimiter(
            config.network_bytes_per_second,
            {
                TrafficClass.TAIL_READ: config.network_share_tail_read,
                TrafficClass.CATCH_UP_READ: config.network_share_catch_up_read,
                TrafficClass.COMPACTION: config.network_share_compaction,
                TrafficClass.TABLE_WRITE: config.network_share_table_write,
            },
            busy_bytes_per_second=config.network_busy_bytes_per_second,
        )
        self._metadata = metadata
        self._objects = objects
        self._wal = wal
        self._run = ThreadRunner(4, "s3stream")
        self._log_cache = LogCache(config.log_cache_bytes)
        self._block_cache: BlockCache[StreamRange] = BlockCache(config.block_cache_bytes)
        self._streams: dict[int, S3Stream] = {}
        self._started = False
        self._closed = False
        self._fenced: BaseException | None = None
        self._writer: Writer | None = None  # (name, epoch) claimed in start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup = asyncio.Event()
        self._upload_lock = asyncio.Lock()
        self._uploader: asyncio.Task[None] | None = None
        self._uploads_in_flight: deque[
            tuple[asyncio.Task[list[ObjectRecord]], list[tuple[S3Stream, list[CacheEntry]]]]
        ] = deque()
        self._prefetches: set[asyncio.Task[None]] = set()
        # per stream: the objects of its last lookup, and whether they are all
        # the objects up to the end that lookup asked for
        self._read_hints: dict[int, tuple[list[ObjectRecord], bool]] = {}
        self._gc_due = False
        self._gc_dirty: set[int] = set()  # streams trimmed or deleted since the last GC
        self._last_gc = 0.0
        self._last_upload = time.monotonic()
        self._last_compaction = time.monotonic()
        self._compactor = Compactor(
            metadata,
            objects,
            CompactionPolicy(
                config.compaction_target_bytes,
                config.compaction_small_bytes,
                stream_object_bytes=config.stream_object_bytes,
                stream_object_target_bytes=config.stream_object_target_bytes,
            ),
            key_for=self._object_key,
            on_deleted=self._block_cache.invalidate,
            run=self._run,
            limiter=self._limiter,
        )
        self.uploads = 0
        self.uploaded_bytes = 0
        self.objects_put = 0

    @property
    def config(self) -> S3StreamConfig:
        return self._config

    @property
    def rate_limiter(self) -> NetworkRateLimiter:
        """The engine's network limiter; other object-store traffic of the
        process (table writes) should ``acquire`` from it too."""
        return self._limiter

    @property
    def log_cache(self) -> LogCache:
        return self._log_cache

    @property
    def block_cache(self) -> BlockCache[StreamRange]:
        return self._block_cache

    # --- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Claim the object prefix as a writer in the metadata store (an older
        engine on it is fenced: its later commits, trims and deletions are
        refused), recover every stream (objects + WAL replay), upload the
        replayed data, then start the background uploader."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        # Claim the object prefix first: from here on an older engine on it
        # (a broker we replace that is still running) commits nothing more,
        # so the stream ends read below stay ours to extend.
        name = f"s3stream:{self._config.object_prefix}"
        self._writer = (name, await self._run(self._metadata.claim_writer, name))
        self._compactor.writer = self._writer
        records = await self._run(self._metadata.list_streams)
        for rec in records:
            if not rec.deleted:
                self._streams[rec.stream_id] = S3Stream(
                    self, rec.stream_id, rec.start_offset, rec.end_offset, rec.end_offset
                )
        replayed = 0
        async for r in self._wal.recover():
            stream = self._streams.get(r.stream_id)
            if stream is None or r.end_offset <= stream.next_offset:
                continue
            if r.base_offset != stream.next_offset:
                log.warning(
                    "WAL record of stream %d at %d does not follow %d; skipped",
                    r.stream_id,
                    r.base_offset,
                    stream.next_offset,
                )
                continue
            batch = StreamBatch(r.stream_id, r.base_offset, r.count, bytes(r.payload))
            self._log_cache.put(batch, r.position)
            stream._next = stream._confirm = r.end_offset
            replayed += 1
        await self._wal.start()
        self._started = True
        if self._config.sweep_orphans_on_start:
            try:
                await self._sweep_orphans()
            except Exception:  # noqa: BLE001 - wasted space only
                log.exception("orphan object sweep failed")
        if replayed:
            log.info("replayed %d WAL records; uploading them", replayed)
        try:
            await self._upload(force=True, drain=True)
        except Exception:  # noqa: BLE001 - the WAL keeps the data; the uploader retries
            log.exception("uploading replayed WAL records failed; will retry")
        self._uploader = asyncio.create_task(self._upload_loop(), name="s3stream-uploader")

    async def close(self) -> None:
        """Wait (up to 20 s) for in-flight appends, upload every durable batch, stop the
        uploader and close the WAL. Later calls raise ``EngineClosedError``."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        # an object WAL cannot finish appends while the store is down: bounded wait
        inflight = [i.result for st in self._streams.values() for i in st._inflight]
        if inflight:
            _, late = await asyncio.wait(inflight, timeout=_CLOSE_WAIT_S)
            if late:
                log.error("%d appends not durable after %.0f s; closing", len(late), _CLOSE_WAIT_S)
        self._wakeup.set()
        if self._uploader is not None and not self._uploader.done():
            try:
                await self._uploader
            except Exception:  # noqa: BLE001 - logged by the loop itself
                log.exception("uploader failed")
        try:
            await self._upload_until_done(time.monotonic() + _CLOSE_UPLOAD_S)
        except Exception:  # noqa: BLE001 - the WAL still holds the data
            log.exception("final upload failed; the data stays in the WAL")
        for task in list(self._prefetches):
            task.cancel()
        self._block_cache.clear()  # its buffers go back to the store's pool
        await self._wal.close()
        self._run.close()

    def _check_open(self) -> None:
        if not self._started or self._closed:
            raise EngineClosedError("the stream engine is not running")

    # --- streams -------------------------------------------------------------------
    async def create_stream(self) -> S3Stream:
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        try:
            sid = await self._run(self._metadata.create_stream, writer=self._writer)
        except WriterFencedError as e:
            raise self._writer_refused(e) from e
        stream = S3Stream(self, sid, 0, 0, 0)
        self._streams[sid] = stream
        return stream

    async def open_stream(self, stream_id: int) -> S3Stream:
        self._check_open()
        stream = self._streams.get(stream_id)
        if stream is not None:
            return stream
        rec = await self._run(self._metadata.get_stream, stream_id)
        if rec is None or rec.deleted:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = S3Stream(self, stream_id, rec.start_offset, rec.end_offset, rec.end_offset)
            self._streams[stream_id] = stream
        return stream

    async def delete_stream(self, stream_id: int) -> None:
        """Delete the stream; its objects are garbage-collected later."""
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        rec = await self._run(self._metadata.get_stream, stream_id)
        if rec is None:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        # as this engine's writer: a fenced engine (a successor owns these
        # streams now) must not delete one under it
        await self._change_metadata(self._metadata.delete_stream, stream_id)
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            stream.deleted = True
        self._log_cache.drop_stream(stream_id)
        self._gc_dirty.add(stream_id)
        self._gc_due = True
        self._wakeup.set()

    # --- append (called by S3Stream) -------------------------------------------------
    def _owner_lost(self) -> bool:
        """Another broker took over this engine's data: it recovered the object
        WAL, or claimed the object prefix in the metadata store (a refused
        commit, ``WriterFencedError``). It owns the data now.

        Unlike a local WAL failure (where uploading what is durable saves it), a
        superseded engine must stop writing objects and metadata altogether."""
        return isinstance(self._fenced, (WalFencedError, WriterFencedError))

    def _fence_error(self) -> BaseException:
        if isinstance(self._fenced, WriterFencedError):
            return StreamFencedError(
                f"the stream engine is fenced: another engine claimed its objects: {self._fenced}"
            )
        return StreamFencedError(f"the stream engine is fenced after a WAL failure: {self._fenced}")

    async def _change_metadata(self, fn: Callable[..., None], *args: object) -> None:
        """Run a change of stream data in the metadata store as this engine's
        writer. A refusal (another engine claimed the prefix; nothing of the
        call happened) fences the engine for good: no more appends, uploads
        or commits; raises ``StreamFencedError`` then."""
        try:
            await self._run(fn, *args, writer=self._writer)
        except WriterFencedError as e:
            raise self._writer_refused(e) from e

    def _writer_refused(self, e: WriterFencedError) -> BaseException:
        """Fence the engine after a refused metadata change; the error to raise."""
        if not self._owner_lost():
            log.error("another engine claimed this engine's objects; it stops writing: %s", e)
            self._fenced = e
        return self._fence_error()

    def _append(
        self, stream: S3Stream, base: int, count: int, payload: bytes
    ) -> asyncio.Future[int]:
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        if self._log_cache.unuploaded_bytes >= self._config.max_pending_upload_bytes:
            self._wakeup.set()
            raise StreamBackpressureError(
                f"{self._log_cache.unuploaded_bytes} bytes wait for upload; retry later"
            )
        assert self._loop is not None
        try:
            w = self._wal.append(stream.stream_id, base, count, payload)
        except Exception as e:
            self._fenced = e
            raise StreamFencedError(f"WAL append failed: {e}") from e
        self._limiter.note_produce(len(payload))
        cache = self._log_cache
        cache.put(StreamBatch(stream.stream_id, base, count, payload), w.position)
        result: asyncio.Future[int] = self._loop.create_future()
        item = stream._track(base, base + count, result)

        def durable(f: asyncio.Future[None]) -> None:
            error = None if f.cancelled() else f.exception()
            if error is None and self._owner_lost():
                error = self._fence_error()  # the successor never sees this WAL record
            if error is not None and self._fenced is None:
                self._fenced = error
            stream._on_durable(item, error)

        w.done.add_done_callback(durable)
        if cache.unuploaded_bytes >= self._config.upload_size_bytes:
            self._wakeup.set()
        if cache.size > self._config.log_cache_bytes:
            cache.evict()
        return result

    # --- upload ---------------------------------------------------------------------
    async def _upload_loop(self) -> None:
        interval = self._config.upload_interval_ms / 1000
        while not self._closed:
            due = self._last_upload + interval - time.monotonic()
            if due > 0 and not self._uploads_in_flight:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout=due)
                except TimeoutError:
                    pass
            self._wakeup.clear()
            if self._closed:
                return
            try:
                # a full interval since the last upload: upload whatever is pending
                await self._upload(force=time.monotonic() - self._last_upload >= interval)
                since_gc = time.monotonic() - self._last_gc
                if since_gc > self._config.gc_interval_ms / 1000:
                    await self.collect_garbage()
                elif self._gc_due and since_gc > _MIN_GC_GAP_S:
                    await self.collect_garbage(only_dirty=True)
                if (
                    time.monotonic() - self._last_compaction
                    > self._config.compaction_interval_ms / 1000
                ):
                    await self.compact()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - retried; the WAL keeps the data
                if self._owner_lost():
                    log.error(
                        "another broker recovered this engine's WAL; it stops uploading "
                        "and accepts no more appends: %s",
                        self._fenced,
                    )
                    return
                log.exception("upload failed; retrying")
                await asyncio.sleep(_RETRY_DELAY_S)
                self._wakeup.set()

    async def _upload(self, *, force: bool, drain: bool = False) -> None:
        """Start uploads of pending durable data (up to ``upload_parallelism``
        objects in flight) and commit the oldest one; with ``drain``, commit
        until nothing is pending.

        Objects are put concurrently but committed strictly in the order they
        were started, so each stream's offsets commit in order; the WAL is
        trimmed after each commit. Without ``force`` only full objects
        (``upload_size_bytes``) are started.
        """
        async with self._upload_lock:
            if self._owner_lost():
                raise self._fence_error()
            while True:
                self._start_uploads(force=force or drain)
                if not self._uploads_in_flight:
                    break
                await self._commit_oldest_upload()
                await self._trim_wal()
                if not drain:
                    break
            self._last_upload = time.monotonic()
            await self._trim_wal()

    def _start_uploads(self, *, force: bool) -> None:
        while len(self._uploads_in_flight) < self._config.upload_parallelism:
            picked = self._pick_pending()
            if not picked:
                return
            size = sum(e.size for _, entries in picked for e in entries)
            if not force and size < self._config.upload_size_bytes:
                return
            for stream, entries in picked:
                self._log_cache.mark_picked(stream.stream_id, entries[-1].batch.end_offset)
            task = asyncio.create_task(self._put_object(picked), name="s3stream-put")
            self._uploads_in_flight.append((task, picked))

    def _pick_pending(self) -> list[tuple[S3Stream, list[CacheEntry]]]:
        """Durable entries neither uploaded nor being uploaded, about
        ``upload_size_bytes`` worth (at least one entry), across streams in
        stream id order."""
        limit = self._config.upload_size_bytes
        picked: list[tuple[S3Stream, list[CacheEntry]]] = []
        total = 0
        for sid in sorted(self._log_cache.streams_with_pending()):
            stream = self._streams.get(sid)
            if stream is None:
                continue
            take: list[CacheEntry] = []
            for e in self._log_cache.pending(sid, stream.confirm_offset, limit - total):
                take.append(e)
                total += e.size
            if take:
                picked.append((stream, take))
            if total >= limit:
                break
        return picked

    async def _put_object(
        self, picked: Sequence[tuple[S3Stream, list[CacheEntry]]]
    ) -> list[ObjectRecord]:
        """Encode and put one upload, not committed yet: a stream object for
        each stream with at least ``stream_object_bytes`` in it, one stream
        set object for the rest. Every stream is in exactly one object."""
        groups: list[tuple[str, list[list[StreamBatch]]]] = []
        shared: list[list[StreamBatch]] = []
        for _, entries in picked:
            batches = [e.batch for e in entries]
            if sum(e.size for e in entries) >= self._config.stream_object_bytes:
                groups.append(("stream", [batches]))
            else:
                shared.append(batches)
        if shared:
            groups.append(("stream_set", shared))

        async def put_one(kind: str, ranges: list[list[StreamBatch]]) -> ObjectRecord:
            object_id = await self._run(self._metadata.next_object_id)
            key = self._object_key(object_id, kind)
            body, index = await self._run(_build_object, ranges)
            await self._objects.put(key, body)
            self.objects_put += 1
            return ObjectRecord(
                object_id, key, len(body), kind, tuple(index), int(time.time() * 1000)
            )

        if len(groups) == 1:
            return [await put_one(*groups[0])]
        results = await asyncio.gather(
            *(put_one(kind, ranges) for kind, ranges in groups), return_exceptions=True
        )
        records = [r for r in results if isinstance(r, ObjectRecord)]
        for r in results:
            if isinstance(r, BaseException):
                if records:
                    try:
                        await self._objects.delete([o.key for o in records])
                    except Exception:  # noqa: BLE001 - orphans are swept at start
                        pass
                raise r
        return records

    async def _commit_oldest_upload(self) -> None:
        task, picked = self._uploads_in_flight[0]
        try:
            records = await asyncio.shield(task)
            for record in records:
                await self._change_metadata(self._metadata.commit_object, record)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            # a refused commit certainly did not happen: delete the oldest too
            refused = isinstance(e.__cause__, WriterFencedError)
            await self._abandon_uploads(keep_oldest=not refused)
            raise
        self._uploads_in_flight.popleft()
        for stream, entries in picked:
            end = entries[-1].batch.end_offset
            self._log_cache.mark_uploaded(stream.stream_id, end)
            stream.committed_end = max(stream.committed_end, end)
        self._log_cache.evict()
        self.uploads += 1
        self.uploaded_bytes += sum(r.size for r in records)

    async def _abandon_uploads(self, *, keep_oldest: bool) -> None:
        """After a failed upload or commit: drop every upload in flight so the
        data is picked again, in order, next time. Objects already put are
        deleted, except the oldest with ``keep_oldest`` (its commit may have
        happened despite the error; if not, the start-up sweep removes it)."""
        tasks = [t for t, _ in self._uploads_in_flight]
        self._uploads_in_flight.clear()
        self._log_cache.unpick_all()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if keep_oldest:
            results = results[1:]
        keys = [o.key for r in results if isinstance(r, list) for o in r]
        if keys:
            try:
                await self._objects.delete(keys)
            except Exception:  # noqa: BLE001 - orphans are swept at the next start
                log.warning("could not delete %d abandoned objects", len(keys))

    def _object_key(self, object_id: int, kind: str = "stream_set") -> str:
        suffix = _STREAM_OBJECT_SUFFIX if kind == "stream" else _STREAM_SET_SUFFIX
        return f"{self._config.object_prefix}{object_id:020d}{suffix}"

    async def _trim_wal(self) -> None:
        upto = self._log_cache.min_unuploaded_wal_position()
        await self._wal.trim(self._wal.next_position if upto is None else upto)

    async def flush(self) -> None:
        """Upload every durable batch now, retrying object-store failures until it is
        done (bound it with a timeout); ``EngineClosedError`` if the engine closes."""
        self._check_open()
        await self._upload_until_done(None)

    async def _upload_until_done(self, deadline: float | None) -> None:
        delay = _RETRY_DELAY_S / 4
        while True:
            try:
                await self._upload(force=True, drain=True)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._owner_lost():
                    raise
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                log.warning("upload failed; retrying in %.2f s", delay, exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_DELAY_S)
            if deadline is None and self._closed:
                raise EngineClosedError("the stream engine closed before the flush completed")

    # --- read ------------------------------------------------------------------------
    def _loader(
        self, sid: int, obj: ObjectRecord, lo: int, hi: int, kind: TrafficClass
    ) -> Callable[[], Awaitable[StreamRange]]:
        key = obj.key
        # A range that is most of its object (a stream object's range is all
        # of it but the index and footer) is read with a plain GET of the
        # object: the same one request, and S3-compatible servers serve it
        # without slicing (moto spends ~25% more CPU per byte on ranged GETs).
        whole = obj.size > 0 and (hi - lo) * 8 >= obj.size * 7 and hi <= obj.size

        async def load() -> StreamRange:
            await self._limiter.acquire(kind, obj.size if whole else hi - lo)

            def parse(body: bytes | memoryview) -> StreamRange:
                if whole:
                    if len(body) != obj.size:
                        raise CorruptDataError(f"object {key} is not the size its record says")
                    data: bytes | memoryview = memoryview(body)[lo:hi]
                else:
                    data = body
                    if len(data) != hi - lo:
                        raise CorruptDataError(f"object {key} is shorter than its index says")
                return StreamRange(sid, data, verify=self._config.verify_checksums)

            # Verified once here (later fetches of the cached range skip the
            # CRCs), in the thread that read it: off the event loop (checking
            # an 8 MiB range takes ~0.6 ms) and while the bytes are in cache.
            if whole:
                return await self._objects.get_then(key, None, None, parse)
            return await self._objects.get_then(key, lo, hi, parse)

        return load

    async def _read_objects(
        self,
        stream: S3Stream,
        start: int,
        end: int,
        max_bytes: int,
        out: list[StreamBatch],
        total: int,
    ) -> tuple[int, bool]:
        """Append to ``out`` batches of ``stream`` from the object holding
        ``start`` (see :meth:`StreamRange.take`: ``total`` is what ``out``
        already holds; returns the new total and whether the read is done).
        The caller loops for more: one small index lookup per object, however
        long the stream."""
        sid = stream.stream_id
        ahead = self._config.read_ahead_ranges
        for attempt in range(3):
            objs = self._hinted_objects(sid, start)
            if objs is None:
                # twice the read-ahead window: the next lookup is then due
                # only every ``ahead`` objects, and the window never waits on it
                limit = 1 + 2 * ahead
                objs = await self._run(self._metadata.objects_for_stream, sid, start, end, limit)
                self._read_hints[sid] = (objs, len(objs) < limit)
                if len(self._read_hints) > 4096:
                    self._read_hints.clear()
            if ahead and len(objs) > 1:
                self._prefetch(sid, objs[1 : 1 + ahead])
            try:
                return await self._read_from(objs[0], sid, start, end, max_bytes, out, total)
            except ObjectNotFoundError:
                self._read_hints.pop(sid, None)
                # Deleted under us: trimmed away (garbage collection), or
                # replaced by compaction (then the metadata names the new one).
                rec = await self._run(self._metadata.get_stream, sid)
                if rec is None or rec.deleted or start < max(stream.start_offset, rec.start_offset):
                    raise OffsetOutOfRangeError(
                        f"offset {start} of stream {sid} was trimmed"
                    ) from None
                if attempt == 2:
                    raise
        return total, True  # pragma: no cover - the loop returns or raises

    def _hinted_objects(self, sid: int, start: int) -> list[ObjectRecord] | None:
        """The objects from the one holding ``start`` of the last lookup for
        ``sid``, if one holds ``start`` and a full read-ahead window follows
        it or the lookup found no more (else look up again). Sequential reads
        thus query the metadata store about once per ``read_ahead_ranges``
        objects rather than once per fetch, including a reader in the
        stream's last objects; a stale hint (compacted or deleted object)
        fails with ``ObjectNotFoundError`` and is dropped, and a read past
        the last hinted object looks up again."""
        hint = self._read_hints.get(sid)
        if not hint:
            return None
        objs, complete = hint
        for i, obj in enumerate(objs):
            for r in obj.ranges:
                if r.stream_id == sid and r.start_offset <= start < r.end_offset:
                    # keep the read-ahead window full: look up again when it
                    # shrinks, unless the lookup found no more objects
                    if complete or len(objs) - i > self._config.read_ahead_ranges:
                        return objs[i:]
                    return None
        return None

    def _prefetch(self, sid: int, objs: list[ObjectRecord]) -> None:
        """Load the ranges of ``sid`` in ``objs`` into the block cache in the
        background (read-ahead for sequential catch-up reads)."""
        if len(self._prefetches) >= 4 * max(1, self._config.read_ahead_ranges):
            return
        for obj in objs:
            for r in obj.ranges:
                if r.stream_id != sid:
                    continue
                lo, hi = r.position, r.position + r.length
                if self._block_cache.contains(obj.key, lo, hi):
                    continue
                if r.length * 2 > self._block_cache.capacity:
                    return  # would evict what the reader is about to use

                async def load(obj: ObjectRecord = obj, lo: int = lo, hi: int = hi) -> None:
                    try:
                        await self._block_cache.get(
                            obj.key,
                            lo,
                            hi,
                            self._loader(sid, obj, lo, hi, TrafficClass.CATCH_UP_READ),
                        )
                    except Exception:  # noqa: BLE001 - the reader loads it again
                        pass

                task = asyncio.create_task(load(), name="s3stream-read-ahead")
                self._prefetches.add(task)
                task.add_done_callback(self._prefetches.discard)

    async def _read_from(
        self,
        obj: ObjectRecord,
        sid: int,
        start: int,
        end: int,
        max_bytes: int,
        out: list[StreamBatch],
        total: int,
    ) -> tuple[int, bool]:
        pos = start
        for r in obj.ranges:
            if r.stream_id != sid or r.end_offset <= pos or r.start_offset >= end:
                continue
            lo, hi = r.position, r.position + r.length
            stream = self._streams.get(sid)
            tail = stream is not None and r.end_offset >= stream.committed_end
            kind = TrafficClass.TAIL_READ if tail else TrafficClass.CATCH_UP_READ
            data = await self._block_cache.get(
                obj.key, lo, hi, self._loader(sid, obj, lo, hi, kind)
            )
            total, done = data.take(pos, end, max_bytes, out, total)
            if done:
                return total, True
            if out:
                pos = out[-1].end_offset
        return total, False

    # --- trim and garbage ------------------------------------------------------------
    async def _trim(self, stream: S3Stream, new_start: int) -> None:
        await self._change_metadata(self._metadata.trim_stream, stream.stream_id, new_start)
        self._log_cache.trim(stream.stream_id, new_start)
        self._gc_dirty.add(stream.stream_id)
        self._gc_due = True

    async def _sweep_orphans(self) -> int:
        """Delete objects under our prefix that no metadata entry names."""
        known = {o.key for o in await self._run(self._metadata.list_objects)}
        listed = await self._objects.list(self._config.object_prefix)
        orphans = [o.key for o in listed if o.key.endswith(OBJECT_SUFFIXES) and o.key not in known]
        if orphans:
            log.info("deleting %d orphan objects", len(orphans))
            await self._objects.delete(orphans)
        return len(orphans)

    async def compact(self) -> int:
        """One compaction pass (see :mod:`ingest.s3stream.compact`); returns
        how many objects were merged away."""
        self._last_compaction = time.monotonic()
        try:
            return await self._compactor.run_once()
        except WriterFencedError as e:
            raise self._writer_refused(e) from e

    def _gc_candidates(
        self, dirty: set[int] | None
    ) -> tuple[list[ObjectRecord], list[StreamRecord]]:
        """(objects to check, stream records): every object, or only the
        objects holding trimmed-away offsets of the ``dirty`` streams."""
        streams = self._metadata.list_streams()
        if dirty is None:
            return self._metadata.list_objects(), streams
        by_id = {s.stream_id: s for s in streams}
        found: dict[int, ObjectRecord] = {}
        for sid in sorted(dirty):
            rec = by_id.get(sid)
            upto = _END if rec is None or rec.deleted else rec.start_offset
            for o in self._metadata.objects_for_stream(sid, 0, upto):
                found[o.object_id] = o
        return [found[k] for k in sorted(found)], streams

    async def collect_garbage(self, *, only_dirty: bool = False) -> int:
        """Delete objects whose every range is trimmed away or belongs to a
        deleted stream; returns how many were deleted. With ``only_dirty``
        only objects of streams trimmed or deleted since the last pass are
        looked at (the periodic full pass catches anything else).

        The metadata entries go first, so a crash in between leaves orphan
        objects (wasted space), never dangling metadata.
        """
        self._gc_due = False
        self._last_gc = time.monotonic()
        dirty, self._gc_dirty = self._gc_dirty, set()
        objs, stream_list = await self._run(self._gc_candidates, dirty if only_dirty else None)
        streams = {s.stream_id: s for s in stream_list}

        def dead(r: ObjectRange) -> bool:
            s = streams.get(r.stream_id)
            return s is None or s.deleted or r.end_offset <= s.start_offset

        doomed = [o for o in objs if all(dead(r) for r in o.ranges)]
        if not doomed:
            return 0
        await self._change_metadata(self._metadata.delete_objects, [o.object_id for o in doomed])
        await self._objects.delete([o.key for o in doomed])
        for o in doomed:
            self._block_cache.invalidate(o.key)
        return len(doomed)
