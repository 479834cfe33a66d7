"""Rewriting a range of one stream in object storage (log compaction).

``Stream.rewrite(start, end, transform)`` on the S3Stream engine:

1. look up every object holding any of the stream's ``[start, end)``
   (``end`` is at most the stream's ``committed_end``: the tail still in the
   log cache and WAL is never rewritten);
2. in chunks of about ``target_bytes`` of objects, read every live range of
   those objects (other streams' ranges of a stream set object too, as the
   compactor does), hand each contiguous run of the stream's batches lying
   wholly inside ``[start, end)`` to ``transform`` (in a worker thread),
   keep everything else as it was, and put one new object per chunk;
3. ``commit_objects(new, compacted=old)``: every new object and the removal
   of every old one in one metadata transaction;
4. delete the old objects, drop their blocks from the block cache, drop the
   stream's uploaded log cache entries below ``end`` and its read hints.

A crash before 3 leaves orphans (swept at start) and the old range; after
3, the new range. The engine runs rewrites and compaction passes under one
lock so they never pick the same objects. Reads and writes pass the network
limiter as compaction traffic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from ingest.errors import CorruptDataError
from ingest.metadata.api import MetadataStore, ObjectRange, ObjectRecord, Writer
from ingest.metadata.errors import ensure_owner
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.api import BatchTransform, RewriteStats, StreamBatch
from ingest.s3stream.compact.compactor import put_object
from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objects.format import StreamRange
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["apply_transform", "split_runs", "transform_runs", "StreamRewriter"]

log = logging.getLogger(__name__)


def apply_transform(
    run: list[StreamBatch], transform: BatchTransform, stats: RewriteStats
) -> list[StreamBatch]:
    """``transform(run)``, checked: the result must be batches of the same
    stream covering exactly the run's offsets, contiguously (else
    ``ValueError``)."""
    out = transform(list(run))
    sid = run[0].stream_id
    expected = run[0].base_offset
    for b in out:
        if b.stream_id != sid or b.base_offset != expected or b.count <= 0:
            raise ValueError(
                f"rewritten batches of stream {sid} must be contiguous from {run[0].base_offset}"
            )
        expected = b.end_offset
    if expected != run[-1].end_offset:
        raise ValueError(
            f"rewritten batches of stream {sid} end at {expected}, not {run[-1].end_offset}"
        )
    stats.batches_in += len(run)
    stats.batches_out += len(out)
    stats.bytes_in += sum(len(b.payload) for b in run)
    stats.bytes_out += sum(len(b.payload) for b in out)
    return out


def split_runs(batches: list[StreamBatch]) -> list[list[StreamBatch]]:
    """Sort by offset, drop batches repeated by overlapping objects, and cut
    into contiguous runs."""
    runs: list[list[StreamBatch]] = []
    run: list[StreamBatch] = []
    for b in sorted(batches, key=lambda b: b.base_offset):
        if run and b.base_offset < run[-1].end_offset:
            continue
        if run and b.base_offset != run[-1].end_offset:
            runs.append(run)
            run = []
        run.append(b)
    if run:
        runs.append(run)
    return runs


def transform_runs(
    runs: list[list[StreamBatch]],
    start: int,
    end: int,
    transform: BatchTransform,
    stats: RewriteStats,
) -> tuple[list[list[StreamBatch]], bool]:
    """Each run with its batches wholly inside ``[start, end)`` transformed,
    and whether anything changed (a transform that hands back the very
    batch objects it was given changes nothing)."""
    out: list[list[StreamBatch]] = []
    changed = False

    def apply(inside: list[StreamBatch]) -> list[StreamBatch]:
        nonlocal changed
        new = apply_transform(inside, transform, stats)
        if len(new) != len(inside) or any(a is not b for a, b in zip(new, inside, strict=True)):
            changed = True
        return new

    for run in runs:
        new: list[StreamBatch] = []
        inside: list[StreamBatch] = []
        for b in run:
            if b.base_offset >= start and b.end_offset <= end:
                inside.append(b)
                continue
            if inside:
                new.extend(apply(inside))
                inside = []
            new.append(b)
        if inside:
            new.extend(apply(inside))
        out.append(new)
    return out, changed


def _checked(r: ObjectRange, data: bytes | memoryview) -> StreamRange:
    if len(data) != r.length:
        raise CorruptDataError(f"stream range of {r.length} bytes read as {len(data)}")
    return StreamRange(r.stream_id, data)


class StreamRewriter:
    """The object side of ``Stream.rewrite`` for the S3Stream engine."""

    def __init__(
        self,
        metadata: MetadataStore,
        objects: ObjectStore,
        key_for: Callable[[int, str], str],
        run: ThreadRunner,
        limiter: NetworkRateLimiter,
        target_bytes: int,
        on_deleted: Callable[[str], None] = lambda _key: None,
    ) -> None:
        self._metadata = metadata
        self._objects = objects
        self._key_for = key_for
        self._run = run
        self._limiter = limiter
        self._target = max(1, target_bytes)
        self._on_deleted = on_deleted
        self.writer: Writer | None = None
        self.rewrites = 0

    async def rewrite(
        self, stream_id: int, start: int, end: int, transform: BatchTransform
    ) -> RewriteStats:
        """Steps 1-4 of the module docstring for ``[start, end)`` (already
        clamped to the committed prefix by the caller)."""
        stats = RewriteStats()
        await self._check_owner(stream_id)
        objs = await self._run(self._metadata.objects_for_stream, stream_id, start, end)
        if not objs:
            return stats
        streams = {s.stream_id: s for s in await self._run(self._metadata.list_streams)}
        chunks: list[list[ObjectRecord]] = [[]]
        size = 0
        for obj in objs:
            if chunks[-1] and size + obj.size > self._target:
                chunks.append([])
                size = 0
            chunks[-1].append(obj)
            size += obj.size
        records: list[ObjectRecord] = []
        replaced: list[ObjectRecord] = []
        try:
            for chunk in chunks:
                ranges: dict[int, list[StreamBatch]] = {}
                for obj in chunk:
                    for r in obj.ranges:
                        s = streams.get(r.stream_id)
                        if s is None or s.deleted or r.end_offset <= s.start_offset:
                            continue
                        await self._limiter.acquire(TrafficClass.COMPACTION, r.length)
                        rng = await self._objects.get_then(
                            obj.key, r.position, r.position + r.length, partial(_checked, r)
                        )
                        ranges.setdefault(r.stream_id, []).extend(rng.batches_from(s.start_offset))
                out_runs: list[list[StreamBatch]] = []
                changed = False
                for sid in sorted(ranges):
                    runs = split_runs(ranges[sid])
                    if sid == stream_id:
                        runs, changed = await self._run(
                            transform_runs, runs, start, end, transform, stats
                        )
                    out_runs.extend(r for r in runs if r)
                if not changed:
                    continue  # nothing to clean in these objects: they stay
                replaced.extend(chunk)
                if out_runs:
                    kind = "stream" if len(ranges) == 1 else "stream_set"
                    records.append(await self._write(kind, out_runs))
            if not replaced:
                return stats
            await self._check_owner(stream_id)  # not taken over meanwhile (a cluster)
            await self._run(
                self._metadata.commit_objects,
                records,
                [o.object_id for o in replaced],
                writer=self.writer,
            )
        except BaseException:
            # nothing committed (a refused commit changes nothing): ours alone
            if records:
                try:
                    await self._objects.delete([r.key for r in records])
                except Exception:  # noqa: BLE001 - orphans are swept at start
                    pass
            raise
        try:
            await self._objects.delete([o.key for o in replaced])
        except Exception:  # noqa: BLE001 - orphans (unreferenced) are swept at start
            log.warning("could not delete %d rewritten objects", len(replaced))
        for o in replaced:
            self._on_deleted(o.key)
        self.rewrites += 1
        log.info(
            "rewrote stream %d [%d, %d): %d objects (%d bytes) into %d (%d bytes)",
            stream_id,
            start,
            end,
            len(replaced),
            sum(o.size for o in replaced),
            len(records),
            sum(r.size for r in records),
        )
        return stats

    async def _check_owner(self, stream_id: int) -> None:
        """``StreamNotOwnedError`` if another broker claimed the stream: only
        its owner rewrites it."""
        if self.writer is None:
            return
        rec = await self._run(self._metadata.get_stream, stream_id)
        if rec is not None:
            ensure_owner(stream_id, rec.owner, self.writer[0])

    async def _write(self, kind: str, runs: list[list[StreamBatch]]) -> ObjectRecord:
        return await put_object(
            self._metadata, self._objects, self._key_for, self._run, self._limiter, kind, runs
        )
