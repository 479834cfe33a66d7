"""Snapshot expiry and orphan removal delete only what they should."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from pyiceberg.table import Table

from spark.errors import MaintenanceJobError
from spark.jobs import expire_snapshots, remove_orphan_files, rewrite_data_files
from tests.integration.spark.conftest import (
    Platform,
    append_with_offsets,
    batch,
    checksum,
    small_append_table,
    spark_rows,
)

pytestmark = pytest.mark.spark


def _local(path: str) -> Path:
    return Path(urlparse(path).path)


def _files_on_disk(table: Table) -> set[Path]:
    root = _local(table.location())
    return {p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")}


def _referenced_data_files(table: Table) -> set[Path]:
    return {_local(t.file.file_path) for t in table.scan().plan_files()}


def test_expire_snapshots_deletes_only_files_no_retained_snapshot_needs(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "clean.expire", commits=10)
    small_files = _referenced_data_files(table)
    rewrite_data_files(spark, "tidelake", "clean.expire")
    table = append_with_offsets(platform.catalog.load_table("clean.expire"), batch(100, 10), 110)
    before = checksum(table.scan().to_arrow())
    live = _referenced_data_files(table)
    assert not small_files & live

    result = expire_snapshots(spark, "tidelake", "clean.expire", retain_last=1)

    table.refresh()
    assert len(table.metadata.snapshots) == 1
    assert result.metrics["deleted_data_files_count"] == len(small_files) == 10
    on_disk = _files_on_disk(table)
    assert not small_files & on_disk  # the compacted-away files are gone
    assert live <= on_disk  # everything the current snapshot reads is still there
    assert checksum(table.scan().to_arrow()) == before
    assert checksum(spark_rows(spark, "clean.expire")) == before


def test_expire_snapshots_keeps_the_newest_snapshot_with_stream_offsets(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "clean.offsets", commits=5)
    rewrite_data_files(spark, "tidelake", "clean.offsets")  # head is now a replace snapshot
    expire_snapshots(spark, "tidelake", "clean.offsets", retain_last=1)
    table.refresh()
    summaries = [s.summary for s in table.metadata.snapshots]
    assert len(summaries) == 2
    assert any(s is not None and s.get("tidelake.offsets") == '{"0": 50}' for s in summaries)
    assert checksum(table.scan().to_arrow())[0] == 50


def _age(path: Path, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))


def test_remove_orphan_files_deletes_only_old_unreferenced_files(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "clean.orphans", commits=4)
    before = checksum(table.scan().to_arrow())
    data_dir = _local(table.location()) / "data"
    referenced = _referenced_data_files(table)
    for path in _files_on_disk(table):  # every real file is old too: age alone must not matter
        _age(path, 5)
    some = next(iter(referenced))
    old_orphan = data_dir / "00000-0-old-orphan.parquet"
    new_orphan = data_dir / "00000-0-in-flight.parquet"  # a worker's file awaiting its commit
    shutil.copy(some, old_orphan)
    shutil.copy(some, new_orphan)
    _age(old_orphan, 4)

    dry = remove_orphan_files(spark, "tidelake", "clean.orphans", dry_run=True)
    assert [_local(f) for f in dry.files] == [old_orphan] and old_orphan.exists()

    result = remove_orphan_files(spark, "tidelake", "clean.orphans")
    assert [_local(f) for f in result.files] == [old_orphan]
    assert not old_orphan.exists() and new_orphan.exists()
    assert referenced <= _files_on_disk(table)
    assert checksum(table.scan().to_arrow()) == before


def test_remove_orphan_files_refuses_recent_cutoffs_unless_allowed(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "clean.recent", commits=2)
    before = checksum(table.scan().to_arrow())
    referenced = _referenced_data_files(table)
    stray = _local(table.location()) / "data" / "stray.parquet"
    shutil.copy(next(iter(referenced)), stray)
    _age(stray, 0.01)
    soon = datetime.now(UTC) - timedelta(minutes=1)
    with pytest.raises(MaintenanceJobError, match="24 hours"):
        remove_orphan_files(spark, "tidelake", "clean.recent", older_than=soon)
    assert stray.exists()

    result = remove_orphan_files(
        spark, "tidelake", "clean.recent", older_than=soon, allow_recent=True
    )
    assert [_local(f) for f in result.files] == [stray] and not stray.exists()
    assert referenced <= _files_on_disk(table)
    table.refresh()
    assert checksum(table.scan().to_arrow()) == before
