"""A table topic commits no empty snapshot when it starts: the table exists from
the start, and its first snapshot holds the first rows."""

from __future__ import annotations

import time

from pyiceberg.exceptions import NoSuchTableError

from tests.integration.table_topic.conftest import TableTopics


def test_the_table_appears_without_a_snapshot_and_every_snapshot_adds_rows(
    tt: TableTopics,
) -> None:
    tt.create_topic("fresh", partitions=2)
    deadline = time.monotonic() + 30
    while True:
        try:
            table = tt.table("fresh")
            break
        except NoSuchTableError:
            assert time.monotonic() < deadline, tt.proc.log_tail()
            time.sleep(0.2)
    assert table.metadata.snapshots == []
    tt.produce("fresh", [(b"k", b"v")] * 5, partition=0)
    tt.wait_rows("fresh", 5)
    snapshots = tt.table("fresh").metadata.snapshots
    assert snapshots
    for snap in snapshots:
        assert snap.summary is not None
        assert int(snap.summary.additional_properties.get("added-records", "0")) > 0
