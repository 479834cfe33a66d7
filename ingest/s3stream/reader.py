"""The S3Stream engine's object read path: ranged reads through the block
cache, read hints (fewer metadata lookups for sequential readers) and
read-ahead of the following objects.

Each object read loads the ranges of one stream from one object, as one GET
through the block cache (:meth:`ObjectReader.read_objects`); reads and
read-ahead pass the network rate limiter as tail or catch-up reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from ingest.errors import CorruptDataError
from ingest.metadata.api import MetadataStore, ObjectRecord
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.api import StreamBatch
from ingest.s3stream.cache import BlockCache
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.errors import ObjectNotFoundError, OffsetOutOfRangeError
from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objects.format import StreamRange
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.stream import S3Stream

__all__ = ["ObjectReader"]

_MAX_HINTS = 4096  # streams with a read hint; all are forgotten past this


class ObjectReader:
    """Reads committed stream data from objects for the engine.

    ``streams`` is the engine's live map of open streams (read, never
    changed here): a range at or past a stream's ``committed_end`` is a tail
    read for the rate limiter.
    """

    def __init__(
        self,
        config: S3StreamConfig,
        metadata: MetadataStore,
        objects: ObjectStore,
        block_cache: BlockCache[StreamRange],
        limiter: NetworkRateLimiter,
        run: ThreadRunner,
        streams: Mapping[int, S3Stream],
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._objects = objects
        self._block_cache = block_cache
        self._limiter = limiter
        self._run = run
        self._streams = streams
        self.prefetches: set[asyncio.Task[None]] = set()
        """Read-ahead loads in flight."""
        # per stream: the objects of its last lookup, and whether they are all
        # the objects up to the end that lookup asked for
        self._read_hints: dict[int, tuple[list[ObjectRecord], bool]] = {}

    def forget(self, stream_id: int) -> None:
        """Drop what is known of the stream's objects (it moved or was reset)."""
        self._read_hints.pop(stream_id, None)

    def cancel_prefetches(self) -> None:
        for task in list(self.prefetches):
            task.cancel()

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

    async def read_objects(
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
                if len(self._read_hints) > _MAX_HINTS:
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
        if len(self.prefetches) >= 4 * max(1, self._config.read_ahead_ranges):
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
                self.prefetches.add(task)
                task.add_done_callback(self.prefetches.discard)

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
            if pos != start and r.start_offset > pos:
                # this object's next run of the stream does not follow: the
                # offsets between are in another object (a stream that left
                # this broker and came back, its runs joined by compaction).
                # The caller looks up the object that holds ``pos``.
                return total, False
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
