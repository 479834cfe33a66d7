"""The S3Stream engine: WAL + log cache + stream (set) objects on object storage.

Write path: ``Stream.append`` assigns the offset, puts the batch in the log
cache and the WAL, and resolves once the WAL has made it durable (fsync'd
in the file WAL; stored as an object in the object WAL); each stream's
``confirm_offset`` advances over the contiguous durable prefix.

Upload path (one background task): when ``upload_size_bytes`` of durable data
is pending, or ``upload_interval_ms`` has passed, pending batches of every
stream are encoded into objects by :mod:`ingest.s3stream.upload` (about
``upload_size_bytes`` per upload: a stream with ``stream_object_bytes`` or
more in it gets a stream object of its own, the rest share a stream set
object), put to the object store (up to ``upload_parallelism`` at once) and
committed to the metadata store strictly in order (which advances each
stream's end_offset). Committed entries become evictable and the WAL is
trimmed below the oldest entry not yet committed. Between uploads the same
task deletes objects whose data is all trimmed (after trims: only the
trimmed streams' objects; a full listing every ``gc_interval_ms``: see
:mod:`ingest.s3stream.gc`) and compacts (:mod:`ingest.s3stream.compact`).

Read path: the log cache first, then objects found through the metadata
store, read with ranged GETs through the block cache; each object read also
prefetches the stream's next ``read_ahead_ranges`` object ranges (see
:mod:`ingest.s3stream.reader`). Object
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
from collections.abc import Callable

from ingest.errors import StorageError
from ingest.metadata.api import MetadataStore, ObjectRecord, Writer
from ingest.metadata.errors import StreamNotOwnedError, WriterFencedError
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.api import BatchTransform, RewriteStats, StreamBatch
from ingest.s3stream.backpressure import UploadBackpressure
from ingest.s3stream.cache import BlockCache, LogCache
from ingest.s3stream.compact import CompactionPolicy, Compactor
from ingest.s3stream.compact.rewrite import StreamRewriter
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.errors import (
    EngineClosedError,
    StreamBackpressureError,
    StreamFencedError,
    UnknownStreamError,
    WalFencedError,
)
from ingest.s3stream.gc import GarbageCollector, object_key
from ingest.s3stream.latency import LatencyHistogram
from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objects.format import StreamRange
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.reader import ObjectReader
from ingest.s3stream.stream import S3Stream, _Inflight
from ingest.s3stream.upload import Picked, UploadBuilder
from ingest.s3stream.wal.api import DurableReplies, ReplySent, WriteAheadLog

__all__ = ["S3StreamEngine"]

log = logging.getLogger(__name__)

_RETRY_DELAY_S = 1.0
_MAX_RETRY_DELAY_S = 4.0
_CLOSE_UPLOAD_S = 15.0  # SIGTERM: keep retrying the final upload this long
_MIN_GC_GAP_S = 1.0  # after trims, collect garbage at most this often
_CLOSE_WAIT_S = 20.0  # close(): how long to wait for appends in flight
_MAX_COUNT = 0x7FFFFFFF  # offsets in one append: the WAL record header's int32


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
        # a WAL whose writer sends replies itself (checked once: a Protocol's isinstance is slow)
        self._replies_wal = wal if isinstance(wal, DurableReplies) else None
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
        self._uploads_in_flight: deque[tuple[asyncio.Task[list[ObjectRecord]], Picked]] = deque()
        self._reader = ObjectReader(
            config, metadata, objects, self._block_cache, self._limiter, self._run, self._streams
        )
        self._gc = GarbageCollector(
            metadata,
            objects,
            self._block_cache,
            self._run,
            self._change_metadata,
            config.object_prefix,
        )
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
            prefix=config.object_prefix,
        )
        self._rewriter = StreamRewriter(
            metadata,
            objects,
            self._object_key,
            self._run,
            self._limiter,
            config.compaction_target_bytes,
            on_deleted=self._block_cache.invalidate,
        )
        self._rewrite_lock = asyncio.Lock()  # rewrites and compaction passes, one at a time
        self.closed_cleanly = False
        """Set by :meth:`close` once every durable batch is in object storage."""
        self.on_fatal: Callable[[BaseException], None] | None = None
        """Called once when the engine is fenced for good (see :meth:`_fail`)."""
        self._builder = UploadBuilder(
            config, metadata, objects, self._log_cache, self._streams, self._run, self._object_key
        )
        self.uploads = 0
        self.uploaded_bytes = 0
        # read by metrics: append call to durable, per append
        self.wal_append_latency = LatencyHistogram()
        self._backpressure = UploadBackpressure(
            self._log_cache, config.max_pending_upload_bytes, objects
        )

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

    @property
    def object_store(self) -> ObjectStore:
        return self._objects

    @property
    def wal_sync_latency(self) -> LatencyHistogram | None:
        """The file WAL's group commits (None for a WAL that keeps no such figure)."""
        hist = getattr(self._wal, "sync_latency", None)
        return hist if isinstance(hist, LatencyHistogram) else None

    @property
    def wal_replies_sent(self) -> dict[str, int] | None:
        """Produce responses the WAL's writer sent itself, by outcome (None
        for a WAL that sends none)."""
        counts = getattr(self._replies_wal, "replies_sent", None)
        return dict(counts) if isinstance(counts, dict) else None

    @property
    def objects_put(self) -> int:
        """Objects put by uploads (compaction's are not counted)."""
        return self._builder.objects_put

    @property
    def object_put_seconds(self) -> float:
        """Time spent in uploads' object puts, summed over :attr:`objects_put`."""
        return self._builder.object_put_seconds

    @property
    def compactions(self) -> int:
        """Compactions run (read by metrics)."""
        return self._compactor.compactions

    @property
    def backpressure_ms(self) -> int:
        """The throttle time (ms) Produce responses should carry now: above 0
        while object storage is degraded or uploads fall behind (see
        :mod:`ingest.s3stream.backpressure`)."""
        return self._backpressure.throttle_ms()

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: ReplySent, first: bool = True
    ) -> int | None:
        """Have the WAL's writer send ``data`` on the connected socket ``fd``
        once every append issued so far is durable (see
        :class:`~ingest.s3stream.wal.api.DurableReplies`); None when this
        engine's WAL cannot, or the engine is fenced."""
        wal = self._replies_wal
        if wal is None or self._fenced is not None or self._closed:
            return None
        return wal.reply_when_durable(fd, data, on_sent, first)

    def cancel_reply(self, token: int) -> bool:
        """Take back a reply of :meth:`reply_when_durable` still waiting."""
        return self._replies_wal is not None and self._replies_wal.cancel_reply(token)

    def sync_now(self) -> None:
        """Start making the appends issued so far durable now, not at the end
        of this loop iteration: a reply of :meth:`reply_when_durable` is
        about to wait for them."""
        if self._replies_wal is not None:
            self._replies_wal.sync_now()

    def poll_durable(self) -> None:
        """While replies of :meth:`reply_when_durable` are outstanding, hear
        now of the appends the WAL made durable (a client holding such a
        reply may ask for its records before the loop heard of them)."""
        wal = self._replies_wal
        if wal is not None and wal.replies_outstanding:
            wal.poll_durable()

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
        self._rewriter.writer = self._writer
        records = await self._run(self._metadata.list_streams)
        for rec in records:
            if rec.owner is not None and rec.owner != name:
                continue  # another broker's now: our WAL's records of it were recovered
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
                await self._gc.sweep_orphans()
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
            self.closed_cleanly = self._fenced is None
        except Exception:  # noqa: BLE001 - the WAL still holds the data
            log.exception("final upload failed; the data stays in the WAL")
        self._reader.cancel_prefetches()
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

    async def open_reader(self, stream_id: int) -> S3Stream:
        """A read-only view of a stream that another engine may be writing (a
        broker serving a partition it does not lead): its offsets are those the
        metadata store has now, so it reads what is uploaded to objects, and
        never more. The view is not held by this engine (it uploads, trims and
        claims nothing); open a new one to see later uploads."""
        self._check_open()
        rec = await self._run(self._metadata.get_stream, stream_id)
        if rec is None or rec.deleted:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        return S3Stream(self, stream_id, rec.start_offset, rec.end_offset, rec.end_offset)

    async def acquire_stream(self, stream_id: int) -> S3Stream:
        """Take over a stream another engine may have written (a partition that
        moved here): claim it in the metadata store, which from then on refuses
        any other engine's commits that add to it, then open it at the end the
        store has, forgetting whatever this engine knew of it before."""
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        old = self._streams.get(stream_id)
        if old is not None and old._inflight:
            raise StreamFencedError(f"stream {stream_id} still has appends in flight here")
        assert self._writer is not None  # claimed in start()
        try:
            await self._run(self._metadata.claim_streams, [stream_id], writer=self._writer)
        except WriterFencedError as e:
            raise self._writer_refused(e) from e
        rec = await self._run(self._metadata.get_stream, stream_id)
        if rec is None or rec.deleted:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        self._log_cache.drop_stream(stream_id)
        self._reader.forget(stream_id)
        stream = S3Stream(self, stream_id, rec.start_offset, rec.end_offset, rec.end_offset)
        self._streams[stream_id] = stream
        return stream

    async def release_stream(self, stream_id: int) -> None:
        """Hand a stream over (its partition moves away): wait for the appends in
        flight, upload everything durable, then forget the stream. The caller
        stops appending first; the next owner's ``acquire_stream`` finds every
        acknowledged offset in the metadata store."""
        self._check_open()
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        inflight = [i.result for i in stream._inflight]
        if inflight:
            await asyncio.wait(inflight, timeout=_CLOSE_WAIT_S)
        await self._flush_stream(stream_id)
        self._streams.pop(stream_id, None)
        self._log_cache.drop_stream(stream_id)
        self._reader.forget(stream_id)

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
        self._gc.mark(stream_id)
        self._wakeup.set()

    # --- append (called by S3Stream) -------------------------------------------------
    def _owner_lost(self) -> bool:
        """Another broker took over this engine's data: it recovered the object
        WAL, or claimed the object prefix in the metadata store (a refused
        commit, ``WriterFencedError``). It owns the data now.

        Unlike a local WAL failure (where uploading what is durable saves it), a
        superseded engine must stop writing objects and metadata altogether."""
        return isinstance(self._fenced, (WalFencedError, WriterFencedError, StreamNotOwnedError))

    def _fence_error(self) -> BaseException:
        if isinstance(self._fenced, WriterFencedError):
            return StreamFencedError(
                f"the stream engine is fenced: another engine claimed its objects: {self._fenced}"
            )
        if isinstance(self._fenced, StreamNotOwnedError):
            return StreamFencedError(
                f"the stream engine is fenced: another broker took a stream over: {self._fenced}"
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
        except StreamNotOwnedError as e:
            # A stream moved to another broker while this engine still wrote
            # to it: this broker missed the move. Nothing of the call was
            # committed; stop writing altogether, as for a claimed prefix.
            if not self._owner_lost():
                log.error("a stream this engine wrote belongs to another broker: %s", e)
                self._fail(e)
            raise self._fence_error() from e

    def _writer_refused(self, e: WriterFencedError) -> BaseException:
        """Fence the engine after a refused metadata change; the error to raise."""
        if not self._owner_lost():
            log.error("another engine claimed this engine's objects; it stops writing: %s", e)
            self._fail(e)
        return self._fence_error()

    def _fail(self, error: BaseException) -> None:
        """The WAL cannot go on (its disk failed, another broker took it over)
        or another engine claimed the objects: fence the engine, say so once
        with the traceback, and call ``on_fatal`` so that the process stops and
        a supervisor restarts it (recovery replays the WAL)."""
        if self._fenced is not None:
            return
        self._fenced = error
        log.critical(
            "the stream engine cannot go on and refuses every append until the process "
            "restarts: %s",
            error,
            exc_info=error,
        )
        if self.on_fatal is not None:
            self.on_fatal(error)

    def _append(
        self, stream: S3Stream, base: int, count: int, payload: bytes
    ) -> asyncio.Future[int]:
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        refusal = self._backpressure.refusal()
        if refusal is not None:
            self._wakeup.set()
            raise StreamBackpressureError(refusal)
        assert self._loop is not None
        if not 0 < count <= _MAX_COUNT:  # the WAL header's int32: this append alone fails
            raise StorageError(f"an append of {count} offsets does not fit a WAL record")
        started = time.perf_counter()
        result: asyncio.Future[int] = self._loop.create_future()
        item: _Inflight | None = None

        def durable(error: BaseException | None) -> None:
            # told by the WAL in the loop iteration that learns of the fsync
            if error is None and self._owner_lost():
                error = self._fence_error()  # the successor never sees this WAL record
            if error is not None and self._fenced is None:
                self._fail(error)
            self.wal_append_latency.observe(time.perf_counter() - started)
            assert item is not None  # tracked before the loop runs a callback
            stream._on_durable(item, error)

        try:
            w = self._wal.append(stream.stream_id, base, count, payload, durable)
        except Exception as e:
            self._fail(e)
            raise StreamFencedError(f"WAL append failed: {e}") from e
        item = stream._track(base, base + count, result)
        self._limiter.note_produce(len(payload))
        cache = self._log_cache
        cache.put(StreamBatch(stream.stream_id, base, count, payload), w.position)
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
                since_gc = time.monotonic() - self._gc.last
                if since_gc > self._config.gc_interval_ms / 1000:
                    await self.collect_garbage()
                elif self._gc.due and since_gc > _MIN_GC_GAP_S:
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
            picked, size = self._builder.pick()
            if not picked:
                return
            if not force and size < self._config.upload_size_bytes:
                return
            for stream, entries, _ in picked:
                self._log_cache.mark_picked(stream.stream_id, entries[-1].batch.end_offset)
            task = asyncio.create_task(self._builder.put(picked), name="s3stream-put")
            self._uploads_in_flight.append((task, picked))

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
        for stream, entries, _ in picked:
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
        return object_key(self._config.object_prefix, object_id, kind)

    async def _trim_wal(self) -> None:
        upto = self._log_cache.min_unuploaded_wal_position()
        await self._wal.trim(self._wal.next_position if upto is None else upto)

    async def flush(self) -> None:
        """Upload every durable batch now, retrying object-store failures until it is
        done (bound it with a timeout); ``EngineClosedError`` if the engine closes."""
        self._check_open()
        await self._upload_until_done(None)

    def _holds(self, stream_id: int) -> bool:
        """The stream has data not yet committed to objects (pending or in flight)."""
        return stream_id in self._log_cache.streams_with_pending() or any(
            s.stream_id == stream_id for _, picked in self._uploads_in_flight for s, _, _ in picked
        )

    async def _flush_stream(self, stream_id: int) -> None:
        """Upload until ``stream_id``'s durable data is in objects, one object at
        a time. Unlike :meth:`flush` it does not wait for the other streams to
        run dry: under a steady load on them (a broker handing one partition
        over while it keeps serving the others) that never happens."""
        delay = _RETRY_DELAY_S / 4
        while self._holds(stream_id):
            stream = self._streams.get(stream_id)
            if not self._uploads_in_flight and (
                stream is None or not self._log_cache.pending(stream_id, stream.confirm_offset, 1)
            ):
                return  # what is left is not durable (a failed WAL write): nothing to upload
            try:
                await self._upload(force=True)
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._owner_lost():
                    raise
                log.warning("upload failed; retrying in %.2f s", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY_S)
                if self._closed:
                    raise EngineClosedError(
                        "the stream engine closed before the flush completed"
                    ) from None

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

    # --- read (called by S3Stream) ---------------------------------------------------
    async def _read_objects(
        self,
        stream: S3Stream,
        start: int,
        end: int,
        max_bytes: int,
        out: list[StreamBatch],
        total: int,
    ) -> tuple[int, bool]:
        """See :meth:`ObjectReader.read_objects`."""
        return await self._reader.read_objects(stream, start, end, max_bytes, out, total)

    # --- trim and garbage ------------------------------------------------------------
    async def _trim(self, stream: S3Stream, new_start: int) -> None:
        await self._change_metadata(self._metadata.trim_stream, stream.stream_id, new_start)
        self._log_cache.trim(stream.stream_id, new_start)
        self._gc.mark(stream.stream_id)

    async def compact(self) -> int:
        """One compaction pass (see :mod:`ingest.s3stream.compact`); returns
        how many objects were merged away."""
        self._last_compaction = time.monotonic()
        try:
            async with self._rewrite_lock:
                return await self._compactor.run_once()
        except WriterFencedError as e:
            raise self._writer_refused(e) from e

    async def _rewrite(
        self, stream: S3Stream, start: int, end: int, transform: BatchTransform
    ) -> RewriteStats:
        """See ``Stream.rewrite`` and :mod:`ingest.s3stream.compact.rewrite`."""
        self._check_open()
        if self._fenced is not None:
            raise self._fence_error()
        async with self._rewrite_lock:
            end = min(end, stream.committed_end)
            if start >= end:
                return RewriteStats()
            try:
                stats = await self._rewriter.rewrite(stream.stream_id, start, end, transform)
            except WriterFencedError as e:
                raise self._writer_refused(e) from e
            # the old bytes leave every cache before readers look again
            self._log_cache.trim(stream.stream_id, end)
            self._reader.forget(stream.stream_id)
            stream.rewrites += 1
            return stats

    async def collect_garbage(self, *, only_dirty: bool = False) -> int:
        """Delete objects whose every range is trimmed away or belongs to a
        deleted stream; returns how many were deleted. With ``only_dirty``
        only objects of streams trimmed or deleted since the last pass are
        looked at (the periodic full pass catches anything else).

        The metadata entries go first, so a crash in between leaves orphan
        objects (wasted space), never dangling metadata.
        """
        return await self._gc.collect(only_dirty=only_dirty)
