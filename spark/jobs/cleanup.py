"""Cleanup jobs: expire old snapshots, remove orphan files.

Both delete files, so both are conservative:

* ``expire_snapshots`` always keeps the newest snapshot (in the current ancestry)
  that carries the stream offsets property (``tidelake.offsets``): Table
  Coordinators resume from it, and rewrites commit snapshots without it.
* ``remove_orphan_files`` only deletes files older than ``older_than`` (3 days by
  default, never less than 24 hours unless ``allow_recent``): a file written by a
  table topic worker is an "orphan" until its interval's commit lands.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from spark.errors import MaintenanceJobError
from spark.jobs._procedures import (
    call_procedure,
    quote_identifier,
    raw,
    sql_string,
    with_conflict_retries,
)
from spark.jobs.result import JobResult

__all__ = ["OFFSETS_PROPERTY", "expire_snapshots", "remove_orphan_files", "snapshots_to_keep"]

OFFSETS_PROPERTY = "tidelake.offsets"
_MIN_ORPHAN_AGE = timedelta(hours=24)


def _timestamp(value: datetime) -> Any:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return raw(f"TIMESTAMP {sql_string(text)}")  # the session time zone is UTC


def snapshots_to_keep(
    session: Any, catalog: str, table: str, offsets_property: str = OFFSETS_PROPERTY
) -> int:
    """How many of the newest ancestors to retain so the newest snapshot with offsets stays."""
    name = f"{quote_identifier(catalog)}.{quote_identifier(table)}"
    rows = session.sql(
        f"SELECT h.snapshot_id, s.summary[{sql_string(offsets_property)}] AS offsets "
        f"FROM {name}.history h JOIN {name}.snapshots s ON h.snapshot_id = s.snapshot_id "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at DESC"
    ).collect()
    for index, row in enumerate(rows):
        if row["offsets"] is not None:
            return index + 1
    return 1


def expire_snapshots(
    session: Any,
    catalog: str,
    table: str,
    *,
    older_than: datetime | None = None,
    retain_last: int = 1,
    protect_offsets: bool = True,
    attempts: int = 4,
) -> JobResult:
    """Expire snapshots older than ``older_than`` (default: now), keeping at least ``retain_last``.

    Files only the expired snapshots referenced are deleted. With ``protect_offsets``
    the newest snapshot carrying ``tidelake.offsets`` (and those after it) are kept.
    """
    if retain_last < 1:
        raise MaintenanceJobError("retain_last must be at least 1")
    cutoff = older_than or datetime.now(UTC)
    start = time.monotonic()

    def attempt() -> list[dict[str, Any]]:
        keep = retain_last
        if protect_offsets:
            keep = max(keep, snapshots_to_keep(session, catalog, table))
        return call_procedure(
            session,
            catalog,
            "expire_snapshots",
            {
                "table": quote_identifier(table),
                "older_than": _timestamp(cutoff),
                "retain_last": keep,
            },
        )

    rows = with_conflict_retries(attempt, what=f"expire_snapshots {table}", attempts=attempts)
    metrics: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, int):
                metrics[key] = metrics.get(key, 0) + value
    return JobResult("expire_snapshots", table, metrics, seconds=time.monotonic() - start)


def remove_orphan_files(
    session: Any,
    catalog: str,
    table: str,
    *,
    older_than: datetime | None = None,
    dry_run: bool = False,
    allow_recent: bool = False,
    location: str | None = None,
) -> JobResult:
    """Delete files under the table location that no snapshot references.

    Only files last modified before ``older_than`` (default 3 days ago) are candidates.
    A cut-off less than 24 hours back is refused unless ``allow_recent`` (then the
    caller vouches that no writer has uncommitted files; ``dry_run`` is not
    available for such recent cut-offs).
    """
    now = datetime.now(UTC)
    cutoff = older_than or now - timedelta(days=3)
    if cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=UTC)
    recent = now - cutoff < _MIN_ORPHAN_AGE
    if recent and not allow_recent:
        raise MaintenanceJobError(
            "remove_orphan_files: older_than must be at least 24 hours back; files of "
            "commits in flight look like orphans (pass allow_recent to override)"
        )
    start = time.monotonic()
    if not recent:
        arguments: dict[str, Any] = {
            "table": quote_identifier(table),
            "older_than": _timestamp(cutoff),
            "dry_run": dry_run,
        }
        if location:
            arguments["location"] = location
        try:
            rows = call_procedure(session, catalog, "remove_orphan_files", arguments)
        except Exception as exc:
            raise MaintenanceJobError(f"remove_orphan_files {table} failed: {exc}") from exc
        files = tuple(str(r["orphan_file_location"]) for r in rows)
    else:
        if dry_run:
            raise MaintenanceJobError("dry_run needs older_than at least 24 hours back")
        files = _delete_orphans_with_action(session, catalog, table, cutoff, location)
    metrics = {"orphan_files_count": len(files), "deleted": 0 if dry_run else len(files)}
    return JobResult(
        "remove_orphan_files", table, metrics, files=files, seconds=time.monotonic() - start
    )


def _delete_orphans_with_action(
    session: Any, catalog: str, table: str, cutoff: datetime, location: str | None
) -> tuple[str, ...]:
    """Iceberg's DeleteOrphanFiles action (the procedure refuses cut-offs under 24 hours)."""
    jvm = session.sparkContext._jvm
    jspark = session._jsparkSession
    try:
        iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            jspark, f"{quote_identifier(catalog)}.{quote_identifier(table)}"
        )
        action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(jspark).deleteOrphanFiles(
            iceberg_table
        )
        action = action.olderThan(int(cutoff.timestamp() * 1000))
        if location:
            action = action.location(location)
        result = action.execute()
        return tuple(str(p) for p in result.orphanFileLocations())
    except Exception as exc:
        raise MaintenanceJobError(f"remove_orphan_files {table} failed: {exc}") from exc
