"""Building one upload: which durable batches go, and the objects they go in.

:class:`UploadBuilder` picks about ``upload_size_bytes`` of durable batches
that are neither uploaded nor being uploaded, across streams in stream id
order, and puts them as objects: a stream object for each stream with at
least ``stream_object_bytes`` in the upload, one stream set object for the
rest. Committing the objects, in order, is the engine's part
(:mod:`ingest.s3stream.engine`); nothing here touches the metadata store
except to allocate object ids.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from ingest.metadata.api import MetadataStore, ObjectRange, ObjectRecord
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.cache import CacheEntry, LogCache
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.objects.format import encode_object
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.stream import S3Stream

__all__ = ["Picked", "UploadBuilder", "build_object"]

Picked = list[tuple[S3Stream, list[CacheEntry], int]]
"""One upload's batches: per stream, its entries in offset order and their bytes."""


def build_object(ranges: list[list[CacheEntry]]) -> tuple[bytearray, list[ObjectRange]]:
    """Encode ranges of cached batches (one list per stream) into an object
    body and its index (on a worker thread: even the list of an upload's
    batches is thousands of items, kept off the event loop)."""
    body, index = encode_object([[e.batch for e in entries] for entries in ranges])
    return body, [
        ObjectRange(e.stream_id, e.start_offset, e.end_offset, e.position, e.length) for e in index
    ]


class UploadBuilder:
    """Picks pending batches and puts them as objects, not committed yet.

    ``streams`` is the engine's live map of open streams (read, never
    changed); ``key_for(object_id, kind)`` names an object.
    """

    def __init__(
        self,
        config: S3StreamConfig,
        metadata: MetadataStore,
        objects: ObjectStore,
        log_cache: LogCache,
        streams: Mapping[int, S3Stream],
        run: ThreadRunner,
        key_for: Callable[[int, str], str],
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._objects = objects
        self._log_cache = log_cache
        self._streams = streams
        self._run = run
        self._key_for = key_for
        self.objects_put = 0
        self.object_put_seconds = 0.0  # summed over every object put

    def pick(self) -> tuple[Picked, int]:
        """Durable entries neither uploaded nor being uploaded, about
        ``upload_size_bytes`` worth (at least one entry), across streams in
        stream id order; and their bytes."""
        limit = self._config.upload_size_bytes
        picked: Picked = []
        total = 0
        for sid in sorted(self._log_cache.streams_with_pending()):
            stream = self._streams.get(sid)
            if stream is None:
                continue
            take, size = self._log_cache.pending_with_bytes(
                sid, stream.confirm_offset, limit - total
            )
            if take:
                picked.append((stream, take, size))
                total += size
            if total >= limit:
                break
        return picked, total

    async def put(self, picked: Picked) -> list[ObjectRecord]:
        """Encode and put one upload: every stream is in exactly one object.
        If any put fails, the objects already put are deleted (best effort:
        the start-up sweep removes what is left) and the error is raised."""
        groups: list[tuple[str, list[list[CacheEntry]]]] = []
        shared: list[list[CacheEntry]] = []
        for _, entries, size in picked:
            if size >= self._config.stream_object_bytes:
                groups.append(("stream", [entries]))
            else:
                shared.append(entries)
        if shared:
            groups.append(("stream_set", shared))
        if len(groups) == 1:
            return [await self._put_one(*groups[0])]
        results = await asyncio.gather(
            *(self._put_one(kind, ranges) for kind, ranges in groups), return_exceptions=True
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

    async def _put_one(self, kind: str, ranges: list[list[CacheEntry]]) -> ObjectRecord:
        object_id = await self._run(self._metadata.next_object_id)
        key = self._key_for(object_id, kind)
        body, index = await self._run(build_object, ranges)
        started = time.perf_counter()
        await self._objects.put(key, body)
        self.object_put_seconds += time.perf_counter() - started
        self.objects_put += 1
        return ObjectRecord(object_id, key, len(body), kind, tuple(index), int(time.time() * 1000))
