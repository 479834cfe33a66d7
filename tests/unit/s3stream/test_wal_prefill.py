"""The file WAL's prefill: an idle writer writes zeros ahead of its last
record in a new segment, so that a record's fdatasync does not also have to
commit a new file size. It must never touch a record, never grow a segment
past its size, and leave nothing a restart would read as records."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ingest.s3stream.wal import FileWriteAheadLog, WalRecord

_STEP = 256 * 1024

pytestmark = pytest.mark.usefixtures("wal_writer")  # every test on both writers


async def _recover(wal: FileWriteAheadLog) -> list[WalRecord]:
    return [r async for r in wal.recover()]


def _segment(d: Path) -> Path:
    (seg,) = sorted(d.glob("*.wal"))
    return seg


def _wait_size(path: Path, size: int, within: float) -> int:
    deadline = time.monotonic() + within
    while (now := path.stat().st_size) < size and time.monotonic() < deadline:
        time.sleep(0.01)
    return now


async def _size_reaches(path: Path, size: int, within: float = 10.0) -> int:
    """The file's size once it is at least ``size`` (or after ``within`` s)."""
    return await asyncio.to_thread(_wait_size, path, size, within)


async def test_an_idle_writer_writes_zeros_ahead_of_the_last_record(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, prefill_bytes=1 << 20)
    await wal.start()
    a = wal.append(1, 0, 1, b"x" * 1000)
    await a.done
    seg = _segment(tmp_path)
    # written in steps of 256 KiB, up to within a step of 1 MiB ahead
    ahead = await _size_reaches(seg, a.end_position + (1 << 20) - _STEP + 1) - a.end_position
    assert (1 << 20) - _STEP < ahead <= 1 << 20
    data = seg.read_bytes()
    assert data[a.end_position :] == bytes(ahead)
    # the next records go right after the first, over the zeros
    b = wal.append(1, 1, 1, b"y" * 3000)
    await b.done
    assert b.position == a.end_position
    await wal.close()
    assert seg.stat().st_size == b.end_position  # a clean close cuts the zeros
    recs = await _recover(FileWriteAheadLog(tmp_path))
    assert [(r.base_offset, bytes(r.payload[:1])) for r in recs] == [(0, b"x"), (1, b"y")]


async def test_a_crash_with_zeros_after_the_records_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = FileWriteAheadLog(tmp_path, prefill_bytes=1 << 20)
    await wal.start()
    hs = [wal.append(1, i, 1, bytes([65 + i]) * 5000) for i in range(5)]
    await asyncio.gather(*(h.done for h in hs))
    seg = _segment(tmp_path)
    await _size_reaches(seg, hs[-1].end_position + (1 << 20) - _STEP + 1)
    # a crash: nothing cuts the zeros
    monkeypatch.setattr(FileWriteAheadLog, "_cut_stale_tail", lambda self: None)
    await wal.close()
    assert seg.stat().st_size > hs[-1].end_position
    monkeypatch.undo()
    again = FileWriteAheadLog(tmp_path, prefill_bytes=1 << 20)
    recs = await _recover(again)
    assert [r.base_offset for r in recs] == [0, 1, 2, 3, 4]
    assert seg.stat().st_size == hs[-1].end_position  # the zeros were cut as a torn tail
    await again.start()
    more = again.append(1, 5, 1, b"z" * 5000)
    await more.done
    assert more.position == hs[-1].end_position
    await again.close()
    recs = await _recover(FileWriteAheadLog(tmp_path))
    assert [r.base_offset for r in recs] == [0, 1, 2, 3, 4, 5]
    assert bytes(recs[-1].payload) == b"z" * 5000


async def test_prefill_never_grows_a_segment_past_its_size(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=1 << 20, prefill_bytes=8 << 20)
    await wal.start()
    a = wal.append(1, 0, 1, b"x" * 100)
    await a.done
    seg = _segment(tmp_path)
    # steps of 256 KiB stop within one step of the segment's size
    reached = await _size_reaches(seg, (1 << 20) - _STEP + 1)
    await asyncio.sleep(0.2)
    assert (1 << 20) - _STEP < reached == seg.stat().st_size <= 1 << 20
    await wal.close()


async def test_without_prefill_the_file_ends_at_the_last_record(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, prefill_bytes=0)
    await wal.start()
    a = wal.append(1, 0, 1, b"x" * 1000)
    await a.done
    await asyncio.sleep(0.2)
    assert _segment(tmp_path).stat().st_size == a.end_position
    await wal.close()
