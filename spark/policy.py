"""When a table needs maintenance: thresholds over file, delete and snapshot counts.

``table_stats`` reads a table's current state through pyiceberg (no Spark);
``plan_jobs`` turns stats and a :class:`MaintenancePolicy` into the jobs to run,
each with the reason, in a safe order (deletes, data files, manifests, snapshots,
orphans).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from pyiceberg.table import Table

__all__ = [
    "JOB_NAMES",
    "MaintenancePolicy",
    "PlannedJob",
    "TableStats",
    "ORPHANS_RUN_PROPERTY",
    "plan_jobs",
    "table_stats",
]

JOB_NAMES = (
    "rewrite_position_delete_files",
    "rewrite_data_files",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphan_files",
)
# Table property recording when orphan removal last ran (milliseconds since the epoch).
ORPHANS_RUN_PROPERTY = "tidelake.maintenance.orphans-removed-at-ms"

_MiB = 1024 * 1024


class MaintenancePolicy(BaseSettings):
    """Thresholds and schedule (environment prefix ``TIDELAKE_MAINTENANCE_``)."""

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_MAINTENANCE_", extra="forbid")

    # Compaction: rewrite when at least ``min_small_files`` files are below
    # ``small_file_ratio`` x the target size.
    target_file_size_bytes: int = Field(default=128 * _MiB, gt=0)
    small_file_ratio: float = Field(default=0.75, gt=0, lt=1)
    min_small_files: int = Field(default=10, ge=2)
    # Sort instead of bin-pack for these tables: {"ns.table": ["col", "other DESC"]}.
    sort_columns: dict[str, list[str]] = Field(default_factory=dict)
    # Position/equality delete files: rewrite when deletes / data files exceed the ratio.
    max_delete_file_ratio: float = Field(default=0.1, ge=0)
    min_delete_files: int = Field(default=2, ge=1)
    # Manifests: rewrite when the current snapshot reads more than this many.
    max_manifests: int = Field(default=50, ge=1)
    # Snapshots: expire when more than ``max_snapshots``; keep ``retain_last`` and all
    # younger than ``snapshot_max_age_seconds``.
    max_snapshots: int = Field(default=50, ge=1)
    retain_last: int = Field(default=5, ge=1)
    snapshot_max_age_seconds: float = Field(default=3600, ge=0)
    # Orphans: at most every ``orphan_interval_seconds``; files younger than
    # ``orphan_min_age_seconds`` are never touched (never less than 24 h).
    remove_orphans: bool = True
    orphan_interval_seconds: float = Field(default=86400, ge=0)
    orphan_min_age_seconds: float = Field(default=3 * 86400, ge=86400)
    # Which tables ("ns.table" or "ns.*"); empty means all. Schedule for ``run --every``.
    tables: list[str] = Field(default_factory=list)
    interval_seconds: float = Field(default=600, gt=0)

    def small_file_bytes(self) -> int:
        return int(self.target_file_size_bytes * self.small_file_ratio)

    def selects(self, table: str) -> bool:
        if not self.tables:
            return True
        for pattern in self.tables:
            if pattern == table:
                return True
            if pattern.endswith(".*") and table.startswith(pattern[:-1]):
                return True
        return False


@dataclass(frozen=True)
class TableStats:
    table: str
    data_files: int
    small_files: int
    data_bytes: int
    records: int
    delete_files: int
    manifests: int
    snapshots: int
    oldest_snapshot_ms: int | None
    orphans_removed_at_ms: int | None

    @property
    def delete_file_ratio(self) -> float:
        return self.delete_files / self.data_files if self.data_files else float(self.delete_files)


@dataclass(frozen=True)
class PlannedJob:
    job: str
    reason: str


def table_stats(name: str, table: Table, small_file_bytes: int) -> TableStats:
    """Counts for the table's current snapshot, read from its manifests."""
    snapshot = table.current_snapshot()
    data_files = small = data_bytes = records = deletes = manifests = 0
    if snapshot is not None:
        manifests = len(snapshot.manifests(table.io))
        files = table.inspect.files().select(["content", "file_size_in_bytes", "record_count"])
        for content, size, count in zip(
            files["content"].to_pylist(),
            files["file_size_in_bytes"].to_pylist(),
            files["record_count"].to_pylist(),
            strict=True,
        ):
            if content == 0:
                data_files += 1
                data_bytes += size
                records += count
                small += size < small_file_bytes
            else:
                deletes += 1
    snaps = table.metadata.snapshots
    orphan_run = table.properties.get(ORPHANS_RUN_PROPERTY)
    return TableStats(
        table=name,
        data_files=data_files,
        small_files=small,
        data_bytes=data_bytes,
        records=records,
        delete_files=deletes,
        manifests=manifests,
        snapshots=len(snaps),
        oldest_snapshot_ms=min((s.timestamp_ms for s in snaps), default=None),
        orphans_removed_at_ms=int(orphan_run) if orphan_run and orphan_run.isdigit() else None,
    )


def plan_jobs(
    stats: TableStats, policy: MaintenancePolicy, now: datetime | None = None
) -> list[PlannedJob]:
    """The jobs ``policy`` calls for, in the order they should run."""
    now_ms = int((now or datetime.now(UTC)).timestamp() * 1000)
    jobs: list[PlannedJob] = []
    if (
        stats.delete_files >= policy.min_delete_files
        and stats.delete_file_ratio > policy.max_delete_file_ratio
    ):
        jobs.append(
            PlannedJob(
                "rewrite_position_delete_files",
                f"{stats.delete_files} delete files for {stats.data_files} data files "
                f"(ratio {stats.delete_file_ratio:.2f} > {policy.max_delete_file_ratio})",
            )
        )
    if stats.small_files >= policy.min_small_files:
        mode = "sort" if stats.table in policy.sort_columns else "bin-pack"
        jobs.append(
            PlannedJob(
                "rewrite_data_files",
                f"{stats.small_files} files under {policy.small_file_bytes()} bytes "
                f"(>= {policy.min_small_files}); {mode}",
            )
        )
    if stats.manifests > policy.max_manifests:
        jobs.append(
            PlannedJob("rewrite_manifests", f"{stats.manifests} manifests > {policy.max_manifests}")
        )
    if stats.snapshots > policy.max_snapshots:
        jobs.append(
            PlannedJob("expire_snapshots", f"{stats.snapshots} snapshots > {policy.max_snapshots}")
        )
    if policy.remove_orphans and stats.snapshots:
        last = stats.orphans_removed_at_ms
        if last is None or now_ms - last >= policy.orphan_interval_seconds * 1000:
            since = "never" if last is None else f"{(now_ms - last) / 3_600_000:.1f} h ago"
            jobs.append(PlannedJob("remove_orphan_files", f"last orphan removal: {since}"))
    return jobs
