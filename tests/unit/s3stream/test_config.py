"""S3StreamConfig and the engine factory."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from ingest.errors import ConfigError
from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine
from ingest.s3stream.factory import open_wal
from ingest.s3stream.objectstore import MemoryObjectStore
from ingest.s3stream.wal import FileWriteAheadLog
from ingest.s3stream.wal import file as file_wal


def test_defaults_are_sane() -> None:
    c = S3StreamConfig()
    assert c.upload_size_bytes == 8 * 1024 * 1024
    assert c.log_cache_bytes == 256 * 1024 * 1024
    assert c.block_cache_bytes == 128 * 1024 * 1024
    assert 0 < c.upload_interval_ms <= 5000


def test_invalid_settings_name_the_key() -> None:
    with pytest.raises(ValidationError, match="upload_size_bytes"):
        S3StreamConfig(upload_size_bytes=0)
    with pytest.raises(ValidationError, match="no_such_key"):
        S3StreamConfig.model_validate({"no_such_key": 1})


def test_open_engine_needs_a_wal_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wal_dir"):
        open_engine(S3StreamConfig(), MemoryMetadataStore(), MemoryObjectStore())
    engine = open_engine(
        S3StreamConfig(wal_dir=tmp_path / "wal"), MemoryMetadataStore(), MemoryObjectStore()
    )
    assert isinstance(engine, S3StreamEngine)


@pytest.mark.parametrize("recycled", [0, 2])
async def test_the_file_wal_keeps_as_many_trimmed_segments_as_configured(
    tmp_path: Path, recycled: int
) -> None:
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal", wal_segment_bytes=1 << 20, wal_recycled_segments=recycled
    )
    engine = open_engine(config, MemoryMetadataStore(), MemoryObjectStore())
    await engine.start()
    s = await engine.create_stream()
    for _ in range(40):
        await s.append(b"x" * 100_000, 1)
    await engine.flush()  # uploads, then trims the WAL
    await engine.close()
    assert len(list((tmp_path / "wal").glob("*.free"))) == recycled


def test_the_file_wal_commits_on_the_writer_thread_the_settings_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert file_wal.NATIVE, "ingest.s3stream.wal._groupcommit is not built"
    for writer, native in (("c", True), ("python", False)):
        wal = open_wal(
            S3StreamConfig(wal_dir=tmp_path / writer, wal_writer=writer), MemoryObjectStore()
        )
        assert isinstance(wal, FileWriteAheadLog) and wal.native is native
    # where the C module is not built, "c" falls back to the Python thread, loudly
    monkeypatch.setattr(file_wal, "NATIVE", False)
    with caplog.at_level(logging.WARNING):
        wal = open_wal(S3StreamConfig(wal_dir=tmp_path / "unbuilt"), MemoryObjectStore())
    assert isinstance(wal, FileWriteAheadLog) and not wal.native
    assert "not built" in caplog.text
    with pytest.raises(ValidationError):
        S3StreamConfig(wal_dir=tmp_path, wal_writer="rust")  # type: ignore[arg-type]
