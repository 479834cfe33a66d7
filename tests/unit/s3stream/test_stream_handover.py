"""A stream handed from one engine to another (a partition moving between the
brokers of a cluster): nothing acknowledged is lost, and the engine that gave
the stream up can no longer add to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.metadata import MemoryMetadataStore, StreamNotOwnedError
from ingest.s3stream import StreamFencedError, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from tests.unit.s3stream.nodes import MIB, node_config


async def test_a_released_stream_continues_on_its_next_owner_with_every_offset(
    tmp_path: Path,
) -> None:
    meta, objects = MemoryMetadataStore(), MemoryObjectStore()
    a = open_engine(node_config(tmp_path, 1), meta, objects)
    b = open_engine(node_config(tmp_path, 2), meta, objects)
    await a.start()
    await b.start()
    try:
        sa = await a.acquire_stream((await a.create_stream()).stream_id)
        for i in range(5):
            await sa.append(b"a%d" % i, 1)
        await a.release_stream(sa.stream_id)  # flushes: every ack is in objects
        sb = await b.acquire_stream(sa.stream_id)
        assert sb.next_offset == 5
        for i in range(3):
            await sb.append(b"b%d" % i, 1)
        batches = await sb.fetch(0, sb.confirm_offset, MIB)
        assert [bytes(x.payload) for x in batches] == [
            b"a0",
            b"a1",
            b"a2",
            b"a3",
            b"a4",
            b"b0",
            b"b1",
            b"b2",
        ]
        assert meta.get_stream(sa.stream_id).owner == "s3stream:streams/node-2/"  # type: ignore[union-attr]
    finally:
        await a.close()
        await b.close()


async def test_the_engine_that_lost_a_stream_cannot_commit_to_it(tmp_path: Path) -> None:
    meta, objects = MemoryMetadataStore(), MemoryObjectStore()
    a = open_engine(node_config(tmp_path, 1), meta, objects)
    b = open_engine(node_config(tmp_path, 2), meta, objects)
    await a.start()
    await b.start()
    try:
        stale = await a.acquire_stream((await a.create_stream()).stream_id)
        await stale.append(b"x", 1)
        await a.flush()
        # b takes the stream over while a still holds it (a missed the move)
        taken = await b.acquire_stream(stale.stream_id)
        await stale.append(b"late", 1)  # durable in a's WAL, but a lost the stream
        with pytest.raises(StreamFencedError, match="another broker took a stream over"):
            await a.flush()
        assert isinstance(a._fenced, StreamNotOwnedError)  # a stopped writing altogether
        await taken.append(b"y", 1)
        await b.flush()
        rec = meta.get_stream(stale.stream_id)
        assert rec is not None and rec.end_offset == 2  # x, then b's y: never a's late write
        batches = await taken.fetch(0, taken.confirm_offset, MIB)
        assert [bytes(x.payload) for x in batches] == [b"x", b"y"]
    finally:
        await b.close()
        a._closed = True  # a's final upload is refused too; don't wait for it
        await a._wal.close()
        a._run.close()
