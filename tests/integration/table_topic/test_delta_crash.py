"""Exactly once into Delta across kill -9: between the Parquet write and the Delta
commit, and after the commit; and for ``both``, between the Iceberg and the Delta
commit. The partition log is the truth: after a restart each table holds every
record of the log exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from table_topic.commit import committed_offsets
from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.integration.table_topic.test_crash import (
    TOPIC,
    _check_exactly_once,
    _log_contents,
    _produce_wave,
)
from tests.integration.table_topic.test_delta import _app_versions, delta_path
from tests.support.platform import TidelakeProcess

Row = tuple[int, int, bytes]


def _delta_rows(tt: TableTopics) -> list[Row]:
    t = DeltaTable(str(delta_path(tt, TOPIC))).to_pyarrow_table()
    return list(
        zip(
            t.column("_kafka_partition").to_pylist(),
            t.column("_kafka_offset").to_pylist(),
            t.column("_kafka_key").to_pylist(),
            strict=True,
        )
    )


def _check_delta_exactly_once(tt: TableTopics, expected: set[Row]) -> None:
    deadline = time.monotonic() + 60
    got: list[Row] = []
    while time.monotonic() < deadline:
        got = _delta_rows(tt)
        if len(got) >= len(expected):
            break
        time.sleep(0.3)
    time.sleep(2.5)  # two more intervals: nothing extra may arrive
    got = _delta_rows(tt)
    assert len(got) == len(set(got)), "a record was committed twice"
    assert set(got) == expected and len(got) == len(expected)


@pytest.mark.parametrize(
    ("fmt", "point"),
    [("delta", "files_written"), ("delta", "after_commit"), ("both", "after_commit")],
)
def test_kill_at_a_delta_commit_point_then_restart_is_exactly_once(
    tmp_path: Path, fmt: str, point: str
) -> None:
    # both + after_commit: the Iceberg commit landed and the process dies before the
    # Delta commit of the same rows, so the two tables restart at different offsets
    env = {
        **TT_ENV,
        "TIDELAKE_TABLE_TOPIC_FAULT_POINT": point,
        "TIDELAKE_TABLE_TOPIC_FAULT_AFTER_COMMITS": "2",
    }
    proc = TidelakeProcess(tmp_path / "data", env=env).start()
    try:
        tt = TableTopics(proc)
        tt.create_topic(
            TOPIC,
            partitions=2,
            **{"table.topic.convert.key.type": "string", "table.topic.format": fmt},
        )
        n = 0
        deadline = time.monotonic() + 40
        while proc.proc is not None and proc.proc.poll() is None and time.monotonic() < deadline:
            _produce_wave(tt, n, 500, tolerate_errors=True)
            n += 500
            time.sleep(0.4)
        assert proc.proc is not None and proc.proc.returncode == 137, proc.log_tail()
        assert f"fault injection: exiting at {point}" in proc.log_tail(200)
        if point == "files_written" and fmt == "delta":
            # the crash left Parquet files the Delta log does not name
            files = set(DeltaTable(str(delta_path(tt, TOPIC))).file_uris())
            on_disk = {str(p) for p in delta_path(tt, TOPIC).glob("*.parquet")}
            assert on_disk - {f.removeprefix("file://") for f in files}
        if fmt == "both":
            iceberg = committed_offsets(tt.table(TOPIC)) or {}
            delta = _app_versions(tt, TOPIC)
            assert sum(iceberg.values()) > sum(delta.values()), (iceberg, delta)
        proc.kill()
        proc.extra_env = dict(TT_ENV)
        proc.start()
        _produce_wave(tt, n + 100_000, 700)
        expected = _log_contents(tt, 2)
        assert len(expected) >= 700
        _check_delta_exactly_once(tt, expected)
        if fmt == "both":
            _check_exactly_once(tt, expected)
    finally:
        proc.stop()
