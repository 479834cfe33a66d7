"""Storage engine failures are loud and bounded: a bad append fails alone, a
WAL that cannot go on stops the engine once, loudly, and nothing hangs."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from ingest.s3stream.wal import FileWriteAheadLog

MIB = 1 << 20


def _engine(tmp_path: Path) -> S3StreamEngine:
    config = S3StreamConfig.model_validate(
        {
            "wal_dir": tmp_path / "wal",
            "wal_segment_bytes": MIB,
            "upload_size_bytes": 8 * MIB,
            "upload_interval_ms": 60_000,
        }
    )
    return open_engine(config, SqliteMetadataStore(tmp_path / "meta.db"), MemoryObjectStore())


async def test_an_append_whose_count_overflows_the_wal_fails_alone(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    await engine.start()
    stream = await engine.create_stream()
    assert await stream.append(b"a", 1) == 0
    with pytest.raises(StorageError):
        stream.append(b"b", 0x80000000)
    # the engine goes on: the next append gets the next offset and is durable
    assert await asyncio.wait_for(stream.append(b"c", 1), 5) == 1
    other = await engine.create_stream()
    assert await asyncio.wait_for(other.append(b"d", 1), 5) == 0
    await engine.close()
    # and the WAL has no hole where the refused record would have been
    engine = _engine(tmp_path)
    await engine.start()
    stream = await engine.open_stream(stream.stream_id)
    assert stream.confirm_offset == 2
    await engine.close()


async def test_a_wal_that_fails_stops_the_engine_once_loudly_and_appends_do_not_hang(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = _engine(tmp_path)
    fatal: list[BaseException] = []
    engine.on_fatal = fatal.append
    await engine.start()
    stream = await engine.create_stream()
    assert await stream.append(b"a", 1) == 0

    # the WAL's active segment now refuses writes, as a failing disk would
    # (at the descriptor: the C writer thread calls no Python)
    wal = engine._wal
    assert isinstance(wal, FileWriteAheadLog)
    readonly = os.open(tmp_path / "wal" / "LOCK", os.O_RDONLY)
    os.dup2(readonly, wal._fd)
    os.close(readonly)
    with caplog.at_level(logging.CRITICAL):
        with pytest.raises(StorageError):
            await asyncio.wait_for(stream.append(b"b", 1), 5)
        with pytest.raises(StorageError):  # refused at once, not left waiting
            await asyncio.wait_for(stream.append(b"c", 1), 5)
    assert len(fatal) == 1
    critical = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert len(critical) == 1 and critical[0].exc_info is not None
    await engine.close()
