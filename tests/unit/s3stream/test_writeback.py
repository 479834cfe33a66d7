"""Paced writes of the file object store: the bytes are the ones given, and
each step is handed to the disk (and waited for) before the next is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.s3stream.objectstore import writeback
from ingest.s3stream.objectstore.writeback import write_all

needs_paced = pytest.mark.skipif(not writeback.PACED, reason="sync_file_range is Linux only")


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 100_003])
@pytest.mark.parametrize("step", [0, 1000, 4096, 1 << 20])
def test_the_file_holds_exactly_the_bytes_written(tmp_path: Path, size: int, step: int) -> None:
    data = os.urandom(size)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, memoryview(data), step)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == data


@needs_paced
def test_each_step_reaches_the_disk_before_the_next_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = writeback._sync_file_range
    assert real is not None
    calls: list[tuple[int, int, int, int]] = []

    def recording(fd: int, offset: int, length: int, flags: int) -> int:
        calls.append((offset, length, os.fstat(fd).st_size, flags))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(writeback, "_sync_file_range", recording)
    data = os.urandom(10_000)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data, 4096)
    finally:
        os.close(fd)
    assert [(o, n) for o, n, _, _ in calls] == [(0, 4096), (4096, 4096), (8192, 1808)]
    # when a step is synced, nothing after it has been written yet
    assert [size for _, _, size, _ in calls] == [4096, 8192, 10_000]
    # and the sync waits for the step's writeback (not only starts it)
    wait_all = writeback._WAIT_BEFORE | writeback._WRITE | writeback._WAIT_AFTER
    assert all(flags == wait_all for _, _, _, flags in calls)
    assert (tmp_path / "f").read_bytes() == data


@needs_paced
def test_a_failed_sync_is_raised(tmp_path: Path) -> None:
    # a pipe is not a file: sync_file_range refuses it (ESPIPE)
    r, w = os.pipe()
    try:
        with pytest.raises(OSError, match="sync_file_range"):
            write_all(w, b"x" * 100, 10)
    finally:
        os.close(r)
        os.close(w)
