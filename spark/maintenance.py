"""Run the maintenance a policy calls for over the tables of the platform catalog.

``maintenance_status`` reads table state through pyiceberg only (fast, no Spark);
``run_maintenance`` runs the planned jobs through a SparkSession. A failing table
is reported and the others still run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException

from spark.errors import MaintenanceJobError, SparkJobError
from spark.jobs import (
    JobResult,
    expire_snapshots,
    remove_orphan_files,
    rewrite_data_files,
    rewrite_manifests,
    rewrite_position_delete_files,
)
from spark.policy import (
    JOB_NAMES,
    ORPHANS_RUN_PROPERTY,
    MaintenancePolicy,
    PlannedJob,
    TableStats,
    plan_jobs,
    table_stats,
)

__all__ = [
    "MaintenanceReport",
    "TableStatus",
    "list_tables",
    "maintenance_status",
    "run_maintenance",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableStatus:
    table: str
    stats: TableStats | None
    planned: list[PlannedJob]
    error: str | None = None


@dataclass
class MaintenanceReport:
    results: list[JobResult] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (table, job, message)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors


def list_tables(catalog: Catalog) -> list[str]:
    """Every table of the catalog as ``ns.table`` (nested namespaces included), sorted."""
    out: list[str] = []
    pending: list[tuple[str, ...]] = [tuple(ns) for ns in catalog.list_namespaces()]
    seen: set[tuple[str, ...]] = set()
    while pending:
        ns = pending.pop()
        if ns in seen:
            continue
        seen.add(ns)
        out.extend(".".join(ident) for ident in catalog.list_tables(ns))
        try:
            pending.extend(tuple(child) for child in catalog.list_namespaces(ns))
        except Exception:  # noqa: BLE001 - flat catalogs (Glue) reject nested listing
            pass
    return sorted(set(out))


def _selected(
    catalog: Catalog, policy: MaintenancePolicy, tables: Sequence[str] | None
) -> list[str]:
    if tables:
        return list(tables)
    return [t for t in list_tables(catalog) if policy.selects(t)]


def maintenance_status(
    catalog: Catalog, policy: MaintenancePolicy, tables: Sequence[str] | None = None
) -> list[TableStatus]:
    """Stats and planned jobs for each selected table."""
    out: list[TableStatus] = []
    for name in _selected(catalog, policy, tables):
        try:
            stats = table_stats(name, catalog.load_table(name), policy.small_file_bytes())
        except Exception as exc:  # noqa: BLE001 - one broken table must not hide the rest
            out.append(TableStatus(name, None, [], f"{type(exc).__name__}: {exc}"))
            continue
        out.append(TableStatus(name, stats, plan_jobs(stats, policy)))
    return out


def _mark_orphans_removed(catalog: Catalog, name: str, when: datetime) -> None:
    for _ in range(10):
        table = catalog.load_table(name)
        try:
            with table.transaction() as tx:
                tx.set_properties({ORPHANS_RUN_PROPERTY: str(int(when.timestamp() * 1000))})
            return
        except CommitFailedException:
            time.sleep(0.1)
    _log.warning("%s: could not record the orphan removal time", name)


def _run_job(
    job: str,
    session: Any,
    catalog_name: str,
    name: str,
    policy: MaintenancePolicy,
    now: datetime,
) -> JobResult:
    if job == "rewrite_position_delete_files":
        return rewrite_position_delete_files(session, catalog_name, name)
    if job == "rewrite_data_files":
        sort = policy.sort_columns.get(name)
        return rewrite_data_files(
            session,
            catalog_name,
            name,
            strategy="sort" if sort else "binpack",
            sort_columns=sort or (),
            target_file_size_bytes=policy.target_file_size_bytes,
            min_input_files=2,
            options={"min-file-size-bytes": str(policy.small_file_bytes())},
        )
    if job == "rewrite_manifests":
        return rewrite_manifests(session, catalog_name, name)
    if job == "expire_snapshots":
        return expire_snapshots(
            session,
            catalog_name,
            name,
            older_than=now - timedelta(seconds=policy.snapshot_max_age_seconds),
            retain_last=policy.retain_last,
        )
    if job == "remove_orphan_files":
        return remove_orphan_files(
            session,
            catalog_name,
            name,
            older_than=now - timedelta(seconds=policy.orphan_min_age_seconds),
        )
    raise MaintenanceJobError(f"unknown job {job!r}; known: {', '.join(JOB_NAMES)}")


def run_maintenance(
    session: Any,
    catalog: Catalog,
    policy: MaintenancePolicy,
    *,
    catalog_name: str,
    tables: Sequence[str] | None = None,
    jobs: Iterable[str] | None = None,
    force: bool = False,
    on_job: Callable[[str, str, str], None] | None = None,
) -> MaintenanceReport:
    """Run what the policy plans (or, with ``force``, every job in ``jobs``) on each table.

    ``jobs`` restricts the run to those job names. ``on_job(table, job, reason)`` is
    called as each job starts.
    """
    wanted = tuple(jobs) if jobs else JOB_NAMES
    unknown = [j for j in wanted if j not in JOB_NAMES]
    if unknown:
        raise MaintenanceJobError(f"unknown job(s) {unknown}; known: {', '.join(JOB_NAMES)}")
    report = MaintenanceReport()
    start = time.monotonic()
    for status in maintenance_status(catalog, policy, tables):
        if status.error is not None:
            report.errors.append((status.table, "status", status.error))
            continue
        if force:
            planned = [PlannedJob(j, "forced") for j in JOB_NAMES if j in wanted]
        else:
            planned = [p for p in status.planned if p.job in wanted]
        for item in planned:
            if on_job is not None:
                on_job(status.table, item.job, item.reason)
            now = datetime.now(UTC)
            try:
                result = _run_job(item.job, session, catalog_name, status.table, policy, now)
            except SparkJobError as exc:
                _log.error("%s %s: %s", status.table, item.job, exc)
                report.errors.append((status.table, item.job, str(exc)))
                continue
            if item.job == "remove_orphan_files":
                _mark_orphans_removed(catalog, status.table, now)
            report.results.append(result)
    report.seconds = time.monotonic() - start
    return report
