"""Garbage collection of the S3Stream engine's objects.

An object is garbage once every range in it is trimmed away or belongs to a
deleted stream. The metadata entries go first, so a crash in between leaves
orphan objects (wasted space), never dangling metadata; orphans (objects
under the prefix no metadata entry names: uploads abandoned by a crash) are
swept at start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from ingest.metadata.api import MetadataStore, ObjectRange, ObjectRecord, StreamRecord
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.cache import BlockCache
from ingest.s3stream.objects.format import StreamRange
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["OBJECT_SUFFIXES", "GarbageCollector"]

log = logging.getLogger(__name__)

_END = 1 << 62  # past any offset
_STREAM_SET_SUFFIX = ".sso"
_STREAM_OBJECT_SUFFIX = ".so"
OBJECT_SUFFIXES = (_STREAM_SET_SUFFIX, _STREAM_OBJECT_SUFFIX)


def object_key(prefix: str, object_id: int, kind: str = "stream_set") -> str:
    """The key of a stream (``kind="stream"``) or stream set object."""
    suffix = _STREAM_OBJECT_SUFFIX if kind == "stream" else _STREAM_SET_SUFFIX
    return f"{prefix}{object_id:020d}{suffix}"


class GarbageCollector:
    """Finds and deletes the engine's dead objects.

    ``change_metadata(fn, *args)`` runs a metadata change as the engine's
    writer (a fenced engine's is refused and raises).
    """

    def __init__(
        self,
        metadata: MetadataStore,
        objects: ObjectStore,
        block_cache: BlockCache[StreamRange],
        run: ThreadRunner,
        change_metadata: Callable[..., Awaitable[None]],
        prefix: str,
    ) -> None:
        self._metadata = metadata
        self._objects = objects
        self._block_cache = block_cache
        self._run = run
        self._change_metadata = change_metadata
        self._prefix = prefix
        self.due = False
        """A stream was trimmed or deleted since the last pass."""
        self.last = 0.0
        """When the last pass started (``time.monotonic()``)."""
        self._dirty: set[int] = set()  # streams trimmed or deleted since the last pass

    def mark(self, stream_id: int) -> None:
        """The stream was trimmed or deleted: its objects may be garbage now."""
        self._dirty.add(stream_id)
        self.due = True

    async def sweep_orphans(self) -> int:
        """Delete objects under our prefix that no metadata entry names."""
        known = {o.key for o in await self._run(self._metadata.list_objects)}
        listed = await self._objects.list(self._prefix)
        orphans = [o.key for o in listed if o.key.endswith(OBJECT_SUFFIXES) and o.key not in known]
        if orphans:
            log.info("deleting %d orphan objects", len(orphans))
            await self._objects.delete(orphans)
        return len(orphans)

    def _candidates(self, dirty: set[int] | None) -> tuple[list[ObjectRecord], list[StreamRecord]]:
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

    async def collect(self, *, only_dirty: bool = False) -> int:
        """Delete objects whose every range is trimmed away or belongs to a
        deleted stream; returns how many were deleted. With ``only_dirty``
        only objects of streams trimmed or deleted since the last pass are
        looked at (the periodic full pass catches anything else)."""
        self.due = False
        self.last = time.monotonic()
        dirty, self._dirty = self._dirty, set()
        objs, stream_list = await self._run(self._candidates, dirty if only_dirty else None)
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
