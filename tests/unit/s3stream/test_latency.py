"""The storage parts' own latency histogram, and the file WAL's group commits in it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ingest.s3stream.latency import LatencyHistogram
from ingest.s3stream.wal.file import FileWriteAheadLog


def test_observations_land_in_the_first_bucket_at_or_above_them() -> None:
    h = LatencyHistogram((0.001, 0.005, 0.01))
    for s in (0.0005, 0.001, 0.002, 0.005, 0.2):
        h.observe(s)
    assert h.counts == [2, 2, 0, 1]  # a value equal to a bound counts at or below it
    assert h.cumulative() == [(0.001, 2), (0.005, 4), (0.01, 4), (float("inf"), 5)]
    assert h.n == 5 and h.total == pytest.approx(0.2085)


def test_bounds_must_ascend() -> None:
    with pytest.raises(ValueError):
        LatencyHistogram((0.01, 0.001))
    with pytest.raises(ValueError):
        LatencyHistogram(())


@pytest.mark.parametrize("native", [True, False], ids=["c-writer", "python-writer"])
def test_the_file_wal_times_each_group_commit(tmp_path: Path, native: bool) -> None:
    async def run() -> FileWriteAheadLog:
        wal = FileWriteAheadLog(tmp_path / "wal", native=native)
        await wal.start()
        try:
            for i in range(3):
                await wal.append(1, i, 1, b"x" * 100).done
            # appends made together share one commit
            await asyncio.gather(*(wal.append(1, 3 + i, 1, b"y").done for i in range(20)))
        finally:
            await wal.close()
        return wal

    wal = asyncio.run(run())
    assert wal.sync_latency.n == wal.syncs
    assert 4 <= wal.syncs < 23
    assert 0 < wal.sync_latency.total < 10 * wal.syncs
