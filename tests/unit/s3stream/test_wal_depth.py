"""The C file WAL writer's sync depth: several group commits in flight at
once, each reported durable only after those before it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.s3stream.wal import FileWriteAheadLog, WalRecord
from ingest.s3stream.wal import file as file_wal


@pytest.fixture(autouse=True)
def _c_writer() -> None:
    assert file_wal.NATIVE, "ingest.s3stream.wal._groupcommit is not built"


async def _recover(wal: FileWriteAheadLog) -> list[WalRecord]:
    return [r async for r in wal.recover()]


def _segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.wal"))


def _writer_threads() -> int:
    """The WAL writer threads of this process, by the name the C writer gives
    them (a count of every thread would catch other tests' threads ending)."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().strip() == "wal-sync"
        except FileNotFoundError:  # the thread ended while we looked
            pass
    return count


@pytest.mark.parametrize("depth", [1, 2, 4])
async def test_overlapping_group_commits_keep_order_across_segment_rolls(
    tmp_path: Path, depth: int
) -> None:
    """With several group commits in flight (and segments rolling under them),
    every append resolves in append order and recovers, in order, byte for byte."""
    await asyncio.to_thread(lambda: None)  # the loop's executor thread, which start() uses
    before = _writer_threads()
    wal = FileWriteAheadLog(tmp_path, segment_bytes=256 * 1024, sync_depth=depth)
    await wal.start()
    assert _writer_threads() == before + depth  # the setting reaches the writer
    payloads = [os.urandom(1000 + (i * 7919) % 30_000) for i in range(600)]
    order: list[int] = []
    handles = []
    for i, payload in enumerate(payloads):
        h = wal.append(i % 4, i, 1, payload)
        h.done.add_done_callback(lambda _f, i=i: order.append(i))
        handles.append(h)
        if i % 3 == 0:  # a new group commit every few appends, while others sync
            await asyncio.sleep(0)
    await asyncio.gather(*(h.done for h in handles))
    assert order == list(range(len(payloads)))
    await wal.close()
    assert _writer_threads() == before
    assert len(_segments(tmp_path)) > 10
    recovered = await _recover(FileWriteAheadLog(tmp_path))
    assert [r.base_offset for r in recovered] == list(range(len(payloads)))
    assert [bytes(r.payload) for r in recovered] == payloads


@pytest.mark.parametrize("depth", [0, 5])
def test_a_sync_depth_out_of_range_is_refused(tmp_path: Path, depth: int) -> None:
    with pytest.raises(StorageError, match="sync depth"):
        FileWriteAheadLog(tmp_path, sync_depth=depth)
