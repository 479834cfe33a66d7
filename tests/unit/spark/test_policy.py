"""The maintenance policy: which jobs a table's state calls for."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.maintenance import list_tables, maintenance_status
from spark.policy import MaintenancePolicy, TableStats, plan_jobs, table_stats

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _stats(**overrides: object) -> TableStats:
    base: dict[str, object] = dict(
        table="ns.t",
        data_files=5,
        small_files=0,
        data_bytes=10,
        records=10,
        delete_files=0,
        manifests=3,
        snapshots=3,
        oldest_snapshot_ms=0,
        orphans_removed_at_ms=int(NOW.timestamp() * 1000),
    )
    base.update(overrides)
    return TableStats(**base)  # type: ignore[arg-type]


def _jobs(stats: TableStats, **policy: object) -> list[str]:
    return [j.job for j in plan_jobs(stats, MaintenancePolicy(**policy), NOW)]  # type: ignore[arg-type]


def test_a_healthy_table_needs_nothing() -> None:
    assert _jobs(_stats()) == []


def test_many_small_files_call_for_compaction() -> None:
    assert _jobs(_stats(small_files=9), min_small_files=10) == []
    assert _jobs(_stats(small_files=10), min_small_files=10) == ["rewrite_data_files"]


def test_sort_columns_turn_compaction_into_a_sort() -> None:
    [job] = plan_jobs(_stats(small_files=20), MaintenancePolicy(sort_columns={"ns.t": ["ts"]}), NOW)
    assert job.job == "rewrite_data_files" and "sort" in job.reason


def test_delete_file_ratio_calls_for_rewriting_deletes() -> None:
    assert _jobs(_stats(delete_files=1, data_files=2)) == []  # under min_delete_files
    assert _jobs(_stats(delete_files=3, data_files=10), max_delete_file_ratio=0.5) == []
    assert _jobs(_stats(delete_files=3, data_files=10)) == ["rewrite_position_delete_files"]


def test_snapshot_and_manifest_counts_call_for_expiry_and_manifest_rewrite() -> None:
    assert _jobs(_stats(snapshots=51, manifests=51)) == ["rewrite_manifests", "expire_snapshots"]


def test_orphan_removal_runs_at_most_once_per_interval() -> None:
    hour_ms = 3_600_000
    now_ms = int(NOW.timestamp() * 1000)
    assert _jobs(_stats(orphans_removed_at_ms=None)) == ["remove_orphan_files"]
    assert _jobs(_stats(orphans_removed_at_ms=now_ms - 2 * hour_ms)) == []
    assert _jobs(_stats(orphans_removed_at_ms=now_ms - 25 * hour_ms)) == ["remove_orphan_files"]
    assert _jobs(_stats(orphans_removed_at_ms=None), remove_orphans=False) == []


def test_jobs_come_in_a_safe_order() -> None:
    stats = _stats(
        small_files=50, delete_files=20, manifests=99, snapshots=99, orphans_removed_at_ms=None
    )
    assert _jobs(stats) == [
        "rewrite_position_delete_files",
        "rewrite_data_files",
        "rewrite_manifests",
        "expire_snapshots",
        "remove_orphan_files",
    ]


def test_orphan_min_age_below_a_day_is_rejected() -> None:
    with pytest.raises(ValueError, match="orphan_min_age_seconds"):
        MaintenancePolicy(orphan_min_age_seconds=3600)


def test_table_patterns_select_tables() -> None:
    policy = MaintenancePolicy(tables=["a.x", "b.*"])
    assert policy.selects("a.x") and policy.selects("b.y") and not policy.selects("a.y")
    assert MaintenancePolicy().selects("anything.at_all")


def test_table_stats_counts_small_files_from_the_manifests(tmp_path: Path) -> None:
    catalog = load_platform_catalog(CatalogSettings(data_dir=tmp_path))
    catalog.create_namespace("ns")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("ns.t", schema=schema)
    for i in range(4):
        table.append(pa.table({"id": [i]}, schema=schema))
    stats = table_stats("ns.t", table, small_file_bytes=1 << 20)
    assert (stats.data_files, stats.small_files, stats.records) == (4, 4, 4)
    assert stats.snapshots == 4 and stats.manifests == 4 and stats.delete_files == 0
    assert list_tables(catalog) == ["ns.t"]
    [status] = maintenance_status(catalog, MaintenancePolicy(min_small_files=3))
    assert [p.job for p in status.planned] == ["rewrite_data_files", "remove_orphan_files"]
