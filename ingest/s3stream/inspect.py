"""Inspect the objects of an S3Stream engine against the metadata store.

Reads each object's own index (one ranged GET of its tail), so the listing
shows what the objects themselves hold, then checks it against the metadata
store: every committed object exists and holds exactly the ranges the
metadata names; objects nobody knows are reported as orphans; each live
stream's committed ranges cover ``[start_offset, end_offset)`` without gaps.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ingest.errors import CorruptDataError
from ingest.metadata.api import MetadataStore, ObjectRecord
from ingest.s3stream.errors import ObjectNotFoundError
from ingest.s3stream.objects.format import IndexEntry
from ingest.s3stream.objects.reader import read_index
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["InspectedObject", "InspectReport", "inspect_storage"]

_SUFFIX_KIND = {".sso": "stream_set", ".so": "stream"}


@dataclass(slots=True)
class InspectedObject:
    key: str
    size: int
    kind: str
    ranges: list[IndexEntry]
    status: str  # "ok" | "orphan" | "missing" | "corrupt" | "mismatch"
    detail: str = ""


@dataclass(slots=True)
class InspectReport:
    objects: list[InspectedObject] = field(default_factory=list)
    wal_objects: list[tuple[str, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _kind_of(key: str) -> str:
    for suffix, kind in _SUFFIX_KIND.items():
        if key.endswith(suffix):
            return kind
    return "unknown"


def _same(index: list[IndexEntry], rec: ObjectRecord) -> bool:
    want = [(r.stream_id, r.start_offset, r.end_offset, r.position, r.length) for r in rec.ranges]
    got = [(e.stream_id, e.start_offset, e.end_offset, e.position, e.length) for e in index]
    return sorted(want) == sorted(got)


async def inspect_storage(
    store: ObjectStore,
    metadata: MetadataStore,
    object_prefix: str = "streams/",
    wal_prefix: str | None = "wal/",
    concurrency: int = 16,
) -> InspectReport:
    """List and verify every object under ``object_prefix``; a problem is
    anything that would lose or misplace data (orphans are only wasted space
    and reported as such, not as problems)."""
    report = InspectReport()
    known = {o.key: o for o in await asyncio.to_thread(metadata.list_objects)}
    streams = await asyncio.to_thread(metadata.list_streams)
    listed = await store.list(object_prefix)
    sem = asyncio.Semaphore(concurrency)

    async def one(key: str, size: int) -> InspectedObject:
        rec = known.get(key)
        async with sem:
            try:
                index = await read_index(store, key, size)
            except CorruptDataError as e:
                return InspectedObject(key, size, _kind_of(key), [], "corrupt", str(e))
        if rec is None:
            return InspectedObject(key, size, _kind_of(key), index, "orphan")
        if rec.size != size or not _same(index, rec) or rec.kind != _kind_of(key):
            return InspectedObject(
                key, size, rec.kind, index, "mismatch", "object differs from its metadata"
            )
        return InspectedObject(key, size, rec.kind, index, "ok")

    report.objects = list(await asyncio.gather(*(one(o.key, o.size) for o in listed)))
    present = {o.key for o in listed}
    for key, rec in known.items():
        if key not in present:
            report.objects.append(InspectedObject(key, rec.size, rec.kind, [], "missing"))
    report.objects.sort(key=lambda o: o.key)
    for o in report.objects:
        if o.status in ("missing", "corrupt", "mismatch"):
            report.problems.append(f"{o.key}: {o.status} {o.detail}".rstrip())
    # each live stream: committed ranges cover [start, end) without gaps
    by_stream: dict[int, list[tuple[int, int]]] = {}
    for o in report.objects:
        if o.status == "ok":
            for e in o.ranges:
                by_stream.setdefault(e.stream_id, []).append((e.start_offset, e.end_offset))
    for s in streams:
        if s.deleted or s.end_offset <= s.start_offset:
            continue
        pos = s.start_offset
        for start, end in sorted(by_stream.get(s.stream_id, [])):
            if end <= pos:
                continue
            if start > pos:
                break
            pos = end
        if pos < s.end_offset:
            report.problems.append(
                f"stream {s.stream_id}: offsets [{pos}, {s.end_offset}) are in no object"
            )
    if wal_prefix:
        try:
            report.wal_objects = [
                (o.key, o.size) for o in await store.list(wal_prefix) if o.key.endswith(".wal")
            ]
        except ObjectNotFoundError:  # pragma: no cover - listing never raises it
            pass
    return report
