"""The file write-ahead log: durability order, group commit, recovery, trim."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.s3stream.wal import FileWriteAheadLog, WalRecord
from ingest.s3stream.wal.file import RECORD_HEADER_SIZE


async def _recover(wal: FileWriteAheadLog) -> list[WalRecord]:
    return [r async for r in wal.recover()]


def _flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.wal"))


async def test_append_assigns_positions_and_resolves_after_sync(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    a = wal.append(1, 0, 3, b"abc")
    b = wal.append(2, 10, 1, b"defg")
    assert (a.position, a.end_position) == (0, RECORD_HEADER_SIZE + 3)
    assert b.position == a.end_position
    await asyncio.gather(a.done, b.done)
    assert wal.syncs >= 1
    await wal.close()


async def test_appends_during_a_sync_are_group_committed(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    handles = [wal.append(1, i, 1, b"x" * 4096) for i in range(500)]
    await asyncio.gather(*(h.done for h in handles))
    assert wal.syncs < 100  # far fewer fsyncs than appends
    await wal.close()


async def test_futures_resolve_in_append_order(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    order: list[int] = []
    handles = [wal.append(1, i, 1, os.urandom(100)) for i in range(200)]
    for i, h in enumerate(handles):
        h.done.add_done_callback(lambda _f, i=i: order.append(i))
    await asyncio.gather(*(h.done for h in handles))
    assert order == list(range(200))
    await wal.close()


async def test_recover_returns_every_record_in_order(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=1 << 20)
    await wal.start()
    payloads = [os.urandom(50_000 + i) for i in range(60)]
    hs = [wal.append(i % 3, i, 2, p) for i, p in enumerate(payloads)]
    await asyncio.gather(*(h.done for h in hs))
    await wal.close()
    assert len(_segments(tmp_path)) > 1

    wal2 = FileWriteAheadLog(tmp_path, segment_bytes=1 << 20)
    recs = await _recover(wal2)
    assert [(r.stream_id, r.base_offset, r.count) for r in recs] == [
        (i % 3, i, 2) for i in range(60)
    ]
    assert [bytes(r.payload) for r in recs] == payloads
    assert [r.position for r in recs] == [h.position for h in hs]
    assert wal2.next_position == hs[-1].end_position
    await wal2.start()
    h = wal2.append(9, 0, 1, b"after")
    assert h.position == hs[-1].end_position
    await h.done
    await wal2.close()
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=1 << 20))
    assert bytes(recs[-1].payload) == b"after"


@pytest.mark.parametrize("cut", [1, RECORD_HEADER_SIZE - 1, RECORD_HEADER_SIZE + 2])
async def test_recover_truncates_a_torn_tail(tmp_path: Path, cut: int) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    hs = [wal.append(1, i, 1, b"p" * 10) for i in range(5)]
    await asyncio.gather(*(h.done for h in hs))
    await wal.close()
    seg = _segments(tmp_path)[-1]
    size = seg.stat().st_size
    os.truncate(seg, size - (RECORD_HEADER_SIZE + 10) + cut)  # tear the last record

    wal2 = FileWriteAheadLog(tmp_path)
    recs = await _recover(wal2)
    assert [r.base_offset for r in recs] == [0, 1, 2, 3]
    assert seg.stat().st_size == hs[3].end_position
    await wal2.start()
    await wal2.append(1, 4, 1, b"q").done
    await wal2.close()
    assert [r.base_offset for r in await _recover(FileWriteAheadLog(tmp_path))] == [0, 1, 2, 3, 4]


async def test_recover_stops_at_a_corrupt_record_and_drops_later_segments(
    tmp_path: Path,
) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=1 << 20)
    await wal.start()
    hs = [wal.append(1, i, 1, os.urandom(300_000)) for i in range(10)]
    await asyncio.gather(*(h.done for h in hs))
    await wal.close()
    segs = _segments(tmp_path)
    assert len(segs) >= 3
    _flip_byte(segs[0], hs[1].position + RECORD_HEADER_SIZE + 7)  # a payload byte
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=1 << 20))
    assert [r.base_offset for r in recs] == [0]
    assert len(_segments(tmp_path)) == 1


async def test_trim_deletes_whole_segments_below_the_position(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=1 << 20)
    await wal.start()
    hs = [wal.append(1, i, 1, os.urandom(400_000)) for i in range(10)]
    await asyncio.gather(*(h.done for h in hs))
    before = len(_segments(tmp_path))
    await wal.trim(hs[6].position)
    after = _segments(tmp_path)
    assert len(after) < before
    assert int(after[0].stem) <= hs[6].position
    await wal.trim(wal.next_position)
    assert len(_segments(tmp_path)) == 1  # the active segment stays
    await wal.close()
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=1 << 20))
    assert all(r.base_offset >= 6 for r in recs)


async def test_append_before_start_raises(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    with pytest.raises(StorageError):
        wal.append(1, 0, 1, b"x")


async def test_close_flushes_queued_appends(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    hs = [wal.append(1, i, 1, b"z" * 1000) for i in range(100)]
    await wal.close()
    assert all(h.done.done() and h.done.exception() is None for h in hs)
    assert len(await _recover(FileWriteAheadLog(tmp_path))) == 100


async def test_a_second_wal_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    other = FileWriteAheadLog(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        await other.start()
    await wal.close()
    await other.start()  # free once the first one is closed
    await other.close()
