"""A stream that left a broker and came back has runs of offsets in that
broker's objects with another broker's objects between them; once its
compaction joins its runs into one object, a read must still return every
offset in order (the object's second run does not follow its first)."""

from __future__ import annotations

from pathlib import Path

from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from tests.unit.s3stream.nodes import MIB, node_config


async def test_a_read_does_not_skip_offsets_held_by_another_brokers_object(
    tmp_path: Path,
) -> None:
    meta, objects = MemoryMetadataStore(), MemoryObjectStore()
    a = open_engine(node_config(tmp_path, 1), meta, objects)
    b = open_engine(node_config(tmp_path, 2), meta, objects)
    reader = open_engine(node_config(tmp_path, 3), meta, objects)
    for e in (a, b, reader):
        await e.start()
    try:
        sid = (await a.create_stream()).stream_id
        n = 0
        for eng in (a, b, a, b):  # a: [0, 5) and [10, 15); b: [5, 10) and [15, 20)
            s = await eng.acquire_stream(sid)
            for _ in range(5):
                await s.append(b"%d" % n, 1)
                n += 1
            await eng.release_stream(sid)
        compacted = await a._compactor.run_once()
        runs = [
            [(r.start_offset, r.end_offset) for r in o.ranges if r.stream_id == sid]
            for o in meta.list_objects()
            if o.key.startswith("streams/node-1/")
        ]
        assert compacted and runs == [[(0, 5), (10, 15)]], runs
        s = await reader.acquire_stream(sid)
        got = await s.fetch(0, 20, 16 * MIB)
        pos = got[-1].end_offset
        while pos < 20:
            more = await s.fetch(pos, 20, 16 * MIB)
            got += more
            pos = more[-1].end_offset
        assert [bytes(x.payload) for x in got] == [b"%d" % i for i in range(20)]
    finally:
        for e in (a, b, reader):
            await e.close()
