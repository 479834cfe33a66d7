"""Compaction of stream set objects and stream objects.

Uploads make one object per interval or per ``upload_size_bytes``; quiet
periods leave many small objects, and trimmed data lingers in objects that
still hold a live range. A compaction pass picks objects that are small or
mostly dead, reads their live ranges, and writes one merged stream set object
in their place:

1. read every live range of the picked objects (CRC-checked) and drop the
   batches wholly below their stream's start offset;
2. put the merged object under a new id;
3. ``commit_object(merged, compacted=picked)`` swaps them atomically in the
   metadata store (stream end offsets do not move);
4. delete the picked objects from the object store.

Streams with at least ``stream_object_bytes`` of live data in a pass are
split out into stream objects of their own (committed first, with no
object removed, so a crash in between leaves the same offsets in two
objects: readers take either, the next pass keeps one).

When no stream set objects need work, a pass merges consecutive small
stream objects of one stream into one of up to ``stream_object_target_bytes``.

A crash after 2 leaves an orphan (swept at start); after 3, leftover picked
objects are orphans too. Readers holding the old object ids retry through
the metadata store when an old object is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ingest.errors import CorruptDataError
from ingest.metadata.api import MetadataStore, ObjectRange, ObjectRecord, StreamRecord, Writer
from ingest.metadata.errors import WriterFencedError
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.api import StreamBatch
from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objects.format import StreamRange, encode_object
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["CompactionPolicy", "Compactor"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    target_bytes: int
    """Merged objects grow up to about this size."""
    small_bytes: int
    """Objects below this size are merge candidates."""
    dead_fraction: float = 0.5
    """Objects with at least this fraction of trimmed bytes are rewritten even alone."""
    stream_object_bytes: int = 1 << 62
    """A stream with this much live data in a merge is split out into a stream object."""
    stream_object_target_bytes: int = 64 * 1024 * 1024
    """Consecutive stream objects are merged up to about this size."""


def _live_bytes(obj: ObjectRecord, streams: dict[int, StreamRecord]) -> int:
    """Bytes of ``obj`` not yet trimmed (a range partly trimmed counts in
    proportion to its live offsets: the metadata does not know batch sizes)."""
    total = 0
    for r in obj.ranges:
        s = streams.get(r.stream_id)
        if s is None or s.deleted or r.end_offset <= s.start_offset:
            continue
        span = r.end_offset - r.start_offset
        live = r.end_offset - max(r.start_offset, s.start_offset)
        total += r.length if span <= 0 else max(1, r.length * live // span)
    return total


def _checked(r: ObjectRange, data: bytes | memoryview) -> StreamRange:
    if len(data) != r.length:
        raise CorruptDataError(f"stream range of {r.length} bytes read as {len(data)}")
    return StreamRange(r.stream_id, data)


class Compactor:
    """Merges small or mostly-dead stream set objects (one merged object per pass)."""

    def __init__(
        self,
        metadata: MetadataStore,
        objects: ObjectStore,
        policy: CompactionPolicy,
        key_for: Callable[[int, str], str],
        on_deleted: Callable[[str], None] = lambda _key: None,
        run: ThreadRunner | None = None,
        limiter: NetworkRateLimiter | None = None,
        prefix: str = "",
    ) -> None:
        self._prefix = prefix
        """Only objects whose keys start with it are compacted: in a cluster
        each broker compacts what it wrote, so no two pick the same object."""
        self._limiter = limiter or NetworkRateLimiter(0, {})
        self._run = run if run is not None else ThreadRunner(1, "s3stream-compact")
        self._metadata = metadata
        self._objects = objects
        self._policy = policy
        self._key_for = key_for
        self._on_deleted = on_deleted
        self.writer: Writer | None = None
        """The writer epoch the commits are checked against (set by the engine)."""
        self.compactions = 0

    def pick(
        self, objs: list[ObjectRecord], streams: dict[int, StreamRecord]
    ) -> list[ObjectRecord]:
        """The objects of the next pass (oldest first): two or more small or
        mostly-dead objects, or one mostly-dead object; empty if none."""
        p = self._policy
        picked: list[ObjectRecord] = []
        any_mostly_dead = False
        live_total = 0
        for obj in objs:
            if obj.kind != "stream_set":
                continue
            live = _live_bytes(obj, streams)
            if live == 0:
                continue  # garbage collection deletes it without a rewrite
            mostly_dead = live <= obj.size * (1 - p.dead_fraction)
            if obj.size >= p.small_bytes and not mostly_dead:
                continue
            if picked and live_total + live > p.target_bytes:
                break
            picked.append(obj)
            live_total += live
            any_mostly_dead = any_mostly_dead or mostly_dead
        if len(picked) >= 2 or (picked and any_mostly_dead):
            return picked
        return []

    def pick_stream_objects(
        self, objs: list[ObjectRecord], streams: dict[int, StreamRecord]
    ) -> list[ObjectRecord]:
        """Two or more consecutive stream objects of one stream, each smaller
        than half the target, together up to about the target; empty if none."""
        limit = self._policy.stream_object_target_bytes
        by_stream: dict[int, list[ObjectRecord]] = {}
        for obj in objs:
            if obj.kind == "stream" and len(obj.ranges) == 1:
                s = streams.get(obj.ranges[0].stream_id)
                if s is None or s.deleted or obj.ranges[0].end_offset <= s.start_offset:
                    continue
                by_stream.setdefault(obj.ranges[0].stream_id, []).append(obj)
        for sid in sorted(by_stream):
            run: list[ObjectRecord] = []
            total = 0
            for obj in sorted(by_stream[sid], key=lambda o: o.ranges[0].start_offset):
                r = obj.ranges[0]
                small = obj.size * 2 <= limit
                follows = bool(run) and run[-1].ranges[0].end_offset == r.start_offset
                if small and follows and total + obj.size <= limit:
                    run.append(obj)
                    total += obj.size
                    continue
                if len(run) >= 2:
                    return run
                run, total = ([obj], obj.size) if small else ([], 0)
            if len(run) >= 2:
                return run
        return []

    async def run_once(self) -> int:
        """One pass; returns how many objects were replaced."""
        objs = [
            o
            for o in await self._run(self._metadata.list_objects)
            if o.key.startswith(self._prefix)
        ]
        streams = {s.stream_id: s for s in await self._run(self._metadata.list_streams)}
        picked = self.pick(objs, streams)
        if not picked:
            picked = self.pick_stream_objects(objs, streams)
            if not picked:
                return 0
        ranges: dict[int, list[StreamBatch]] = {}
        for obj in picked:
            for r in obj.ranges:
                s = streams.get(r.stream_id)
                if s is None or s.deleted or r.end_offset <= s.start_offset:
                    continue
                await self._limiter.acquire(TrafficClass.COMPACTION, r.length)
                # checked (CRC32C) in the thread that reads it: a pass reads
                # tens of MiB, and checking them on the event loop would
                # stall produce for milliseconds at a time
                rng = await self._objects.get_then(
                    obj.key, r.position, r.position + r.length, partial(_checked, r)
                )
                ranges.setdefault(r.stream_id, []).extend(rng.batches_from(s.start_offset))
        runs: list[list[StreamBatch]] = []
        for sid in sorted(ranges):
            batches = sorted(ranges[sid], key=lambda b: b.base_offset)
            run: list[StreamBatch] = []
            for b in batches:
                if run and b.base_offset < run[-1].end_offset:
                    continue  # the same offsets twice (overlapping objects): keep one
                if run and b.base_offset != run[-1].end_offset:
                    runs.append(run)
                    run = []
                run.append(b)
            if run:
                runs.append(run)
        # split: streams big enough get stream objects; the rest share one object
        all_stream_objects = all(o.kind == "stream" for o in picked)
        per_stream: dict[int, list[list[StreamBatch]]] = {}
        for run in runs:
            per_stream.setdefault(run[0].stream_id, []).append(run)
        outputs: list[tuple[str, list[list[StreamBatch]]]] = []
        shared: list[list[StreamBatch]] = []
        for sruns in per_stream.values():
            size = sum(len(b.payload) for r in sruns for b in r)
            if all_stream_objects or (len(sruns) == 1 and size >= self._policy.stream_object_bytes):
                outputs.extend(("stream", [r]) for r in sruns)
            else:
                shared.extend(sruns)
        if shared:
            outputs.append(("stream_set", shared))
        records: list[ObjectRecord] = []
        for kind, out_runs in outputs:
            records.append(await self._write(kind, out_runs))
        # all outputs and the removal of the inputs in one metadata transaction:
        # a crash never leaves inputs and some outputs both live
        try:
            await self._run(
                self._metadata.commit_objects,
                records,
                [o.object_id for o in picked],
                writer=self.writer,
            )
        except WriterFencedError:
            # refused as a whole: the outputs are ours alone, the inputs stay
            try:
                await self._objects.delete([r.key for r in records])
            except Exception:  # noqa: BLE001 - orphans are swept at start
                pass
            raise
        await self._objects.delete([o.key for o in picked])
        for o in picked:
            self._on_deleted(o.key)
        self.compactions += 1
        log.info(
            "compacted %d objects (%d bytes) into %d (%d bytes)",
            len(picked),
            sum(o.size for o in picked),
            len(records),
            sum(r.size for r in records),
        )
        return len(picked)

    async def _write(self, kind: str, runs: list[list[StreamBatch]]) -> ObjectRecord:
        """Encode and put one object (not committed)."""
        return await put_object(
            self._metadata, self._objects, self._key_for, self._run, self._limiter, kind, runs
        )


async def put_object(
    metadata: MetadataStore,
    objects: ObjectStore,
    key_for: Callable[[int, str], str],
    run: ThreadRunner,
    limiter: NetworkRateLimiter,
    kind: str,
    runs: list[list[StreamBatch]],
) -> ObjectRecord:
    """Encode ``runs`` into one new object and put it, as compaction traffic;
    the record to commit (nothing is committed here). The compactor and the
    stream rewriter both write their objects so."""
    object_id = await run(metadata.next_object_id)
    key = key_for(object_id, kind)

    def build() -> tuple[bytearray, list[ObjectRange]]:
        body, index = encode_object(runs)
        return body, [
            ObjectRange(e.stream_id, e.start_offset, e.end_offset, e.position, e.length)
            for e in index
        ]

    body, new_ranges = await run(build)
    await limiter.acquire(TrafficClass.COMPACTION, len(body))
    await objects.put(key, body)
    return ObjectRecord(object_id, key, len(body), kind, tuple(new_ranges), int(time.time() * 1000))
