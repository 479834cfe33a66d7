"""The file write-ahead log: durability order, group commit, recovery, trim."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.s3stream.wal import FileWriteAheadLog, WalRecord
from ingest.s3stream.wal.codec import encode_header, scan_records
from ingest.s3stream.wal.file import RECORD_HEADER_SIZE

pytestmark = pytest.mark.usefixtures("wal_writer")  # every test on both writers


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


async def test_appends_of_one_loop_iteration_share_one_sync(tmp_path: Path, wal_writer: str) -> None:
    """All partitions of a request are appended in one go: the C writer waits
    for the end of the loop iteration, so they share one fdatasync."""
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    for round_ in range(5):
        before = wal.syncs
        handles = [wal.append(p, round_, 1, b"r" * 27_000) for p in range(4)]
        await asyncio.gather(*(h.done for h in handles))
        if wal_writer != "python-writer":
            assert wal.syncs == before + 1
        else:  # the Python thread needs the GIL first, which batches them too, mostly
            assert before < wal.syncs <= before + 4
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


async def test_listeners_are_told_once_in_append_order_before_the_futures_callbacks(
    tmp_path: Path,
) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    told: list[tuple[str, int, BaseException | None]] = []
    handles = []
    for i in range(50):
        h = wal.append(1, i, 1, os.urandom(100), lambda e, i=i: told.append(("on_done", i, e)))
        h.done.add_done_callback(lambda _f, i=i: told.append(("callback", i, None)))
        handles.append(h)
    await asyncio.gather(*(h.done for h in handles))
    await asyncio.sleep(0)
    listened = [(i, e) for kind, i, e in told if kind == "on_done"]
    assert listened == [(i, None) for i in range(50)]
    for i in range(50):
        assert told.index(("on_done", i, None)) < told.index(("callback", i, None))
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


async def test_a_failed_write_fails_its_records_and_every_append_after(
    tmp_path: Path, wal_writer: str
) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    assert wal.native == (wal_writer != "python-writer")
    await wal.append(1, 0, 1, b"ok").done
    # the active segment's descriptor now refuses writes (as a failing disk would)
    readonly = os.open(tmp_path / "LOCK", os.O_RDONLY)
    os.dup2(readonly, wal._fd)
    os.close(readonly)
    told: list[BaseException | None] = []
    failed = [wal.append(1, 1 + i, 1, b"lost", told.append) for i in range(3)]
    for h in failed:
        with pytest.raises(StorageError, match="WAL write failed"):
            await h.done
    await asyncio.sleep(0)
    assert len(told) == 3 and all(isinstance(e, StorageError) for e in told)
    with pytest.raises(StorageError, match="failed earlier"):
        wal.append(1, 9, 1, b"refused")
    await wal.close()
    assert [r.base_offset for r in await _recover(FileWriteAheadLog(tmp_path))] == [0]


async def test_payload_buffers_are_written_as_they_were_appended(tmp_path: Path) -> None:
    """The writer holds the appended buffers, not copies: what it writes is
    what each append passed, memoryviews of one shared buffer included."""
    wal = FileWriteAheadLog(tmp_path, segment_bytes=1 << 16)
    await wal.start()
    shared = bytearray(os.urandom(50_000))
    hs = [wal.append(1, i, 1, memoryview(shared)[i * 1000 : i * 1000 + 900]) for i in range(50)]
    hs += [wal.append(2, i, 1, bytes([i]) * (i * 37)) for i in range(1, 200)]
    await asyncio.gather(*(h.done for h in hs))
    await wal.close()
    recs = await _recover(FileWriteAheadLog(tmp_path))
    assert [bytes(r.payload) for r in recs[:50]] == [
        bytes(shared[i * 1000 : i * 1000 + 900]) for i in range(50)
    ]
    assert [bytes(r.payload) for r in recs[50:]] == [bytes([i]) * (i * 37) for i in range(1, 200)]
    assert len(_segments(tmp_path)) > 1


async def test_a_second_wal_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    other = FileWriteAheadLog(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        await other.start()
    await wal.close()
    await other.start()  # free once the first one is closed
    await other.close()


# --- recycled segments ---------------------------------------------------------
_SEG = 1 << 20
_PAYLOAD = 100_000  # ten records fill a 1 MiB segment


def _spares(d: Path) -> list[Path]:
    return sorted(d.glob("*.free"))


async def _fill(wal: FileWriteAheadLog, first: int, n: int, fill: bytes) -> list[int]:
    """Append ``n`` same-sized records with offsets from ``first``: a recycled
    segment's old records line up exactly with the new ones."""
    hs = [wal.append(1, first + i, 1, fill * _PAYLOAD) for i in range(n)]
    await asyncio.gather(*(h.done for h in hs))
    return [h.position for h in hs]


def test_a_record_read_at_another_position_fails_its_check() -> None:
    header = encode_header(1, 5, 1, b"payload", 4096)
    data = header + b"payload"
    assert [r.base_offset for r in scan_records(data, 4096)[0]] == [5]
    assert scan_records(data, 0) == ([], 0, True)
    assert scan_records(data, 4096 + len(data)) == ([], 0, True)
    # renumbered on recovery, checked where it was written
    (rec,) = scan_records(data, 0, written_at=4096)[0]
    assert (rec.position, rec.end_position) == (0, len(data))


async def test_trim_keeps_segments_as_spares_and_new_segments_reuse_their_files(
    tmp_path: Path,
) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=2)
    await wal.start()
    pos = await _fill(wal, 0, 35, b"a")  # four segments
    assert len(_segments(tmp_path)) == 4
    await wal.trim(pos[30])
    assert len(_segments(tmp_path)) == 1
    spares = _spares(tmp_path)
    assert len(spares) == 2  # the third trimmed segment is deleted
    inodes = {p.stat().st_ino for p in spares}
    await _fill(wal, 35, 20, b"b")  # rolls into two new segments
    assert _spares(tmp_path) == []
    assert {p.stat().st_ino for p in _segments(tmp_path)[1:]} == inodes
    await wal.close()
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=_SEG))
    assert [r.base_offset for r in recs] == list(range(30, 55))
    assert all(bytes(r.payload) == b"b" * _PAYLOAD for r in recs[5:])


async def test_recovery_never_replays_a_recycled_segments_old_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash while writing into a recycled segment: its old records, of the
    same size and offsets as the new ones, must not come back."""
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=2)
    await wal.start()
    pos = await _fill(wal, 0, 25, b"a")
    await wal.trim(pos[20])  # two segments become spares
    # a crash: the writer stops where it is, the spare's old bytes stay after it
    monkeypatch.setattr(FileWriteAheadLog, "_cut_stale_tail", lambda self: None)
    await _fill(wal, 25, 8, b"b")  # fills the active segment, then 3 into a recycled one
    await wal.close()
    last = _segments(tmp_path)[-1]
    assert last.stat().st_size == _SEG - _SEG % (RECORD_HEADER_SIZE + _PAYLOAD)  # old bytes
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=_SEG))
    assert [r.base_offset for r in recs] == list(range(20, 33))
    assert [bytes(r.payload[:1]) for r in recs] == [b"a"] * 5 + [b"b"] * 8


async def test_a_full_recycled_segment_hands_over_to_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recycled segment that filled up ends in old bytes; the log goes on in
    the next segment, and recovery must read on into it."""
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=2)
    await wal.start()
    pos = await _fill(wal, 0, 25, b"a")
    await wal.trim(pos[20])
    monkeypatch.setattr(FileWriteAheadLog, "_cut_stale_tail", lambda self: None)
    # one 300 kB record finishes the active segment, three fill a recycled
    # one to 900 kB of its old 1,000 kB, two go on into the next
    hs = [wal.append(1, 25 + i, 1, b"b" * 300_000) for i in range(6)]
    await asyncio.gather(*(h.done for h in hs))
    await wal.close()
    segs = _segments(tmp_path)
    assert [int(p.stem) for p in segs[1:]] == [hs[1].position, hs[4].position]
    assert segs[1].stat().st_size > hs[4].position - hs[1].position  # old bytes at its end
    recs = await _recover(FileWriteAheadLog(tmp_path, segment_bytes=_SEG))
    assert [r.base_offset for r in recs] == list(range(20, 31))


async def test_a_clean_restart_after_recycling_finds_no_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=2)
    await wal.start()
    pos = await _fill(wal, 0, 25, b"a")
    await wal.trim(pos[20])
    await _fill(wal, 25, 8, b"b")
    await wal.close()
    wal2 = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=2)
    with caplog.at_level("WARNING"):
        recs = await _recover(wal2)
    assert [r.base_offset for r in recs] == list(range(20, 33))
    assert not [m for m in caplog.messages if "torn" in m]
    # the spare left by the first run is used by the second
    assert len(_spares(tmp_path)) == 1
    await wal2.start()
    await _fill(wal2, 33, 10, b"c")
    assert _spares(tmp_path) == []
    await wal2.close()


async def test_spares_beyond_the_limit_are_deleted_at_start(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"{i:020d}.free").write_bytes(b"old" * 1000)
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=1)
    assert await _recover(wal) == []
    assert len(_spares(tmp_path)) == 1
    await wal.start()
    await wal.append(1, 0, 1, b"x").done
    await wal.close()
    assert [bytes(r.payload) for r in await _recover(FileWriteAheadLog(tmp_path))] == [b"x"]


async def test_without_recycling_trim_deletes_segments(tmp_path: Path) -> None:
    wal = FileWriteAheadLog(tmp_path, segment_bytes=_SEG, recycled_segments=0)
    await wal.start()
    pos = await _fill(wal, 0, 25, b"a")
    await wal.trim(pos[20])
    assert _spares(tmp_path) == [] and len(_segments(tmp_path)) == 1
    await wal.close()

