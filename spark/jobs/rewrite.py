"""Rewrite jobs: data files (bin-pack or sort) to a target size, manifests, position deletes.

All run Iceberg's Spark procedures. A rewrite replaces files with files holding the
same rows; it commits optimistically and, on a conflict with a concurrent commit
(a Table Coordinator appending), retries from the fresh table state. Appends never
conflict with a rewrite; deletes of rewritten files do, and those attempts retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from catalog.properties import REWRITE_LEASE_PROPERTY
from spark.errors import MaintenanceJobError
from spark.jobs._procedures import (
    call_procedure,
    quote_identifier,
    sql_string,
    with_conflict_retries,
)
from spark.jobs.result import JobResult

__all__ = ["rewrite_data_files", "rewrite_manifests", "rewrite_position_delete_files"]

_STRATEGIES = ("binpack", "sort")
_NESTED_COLUMN_BUG = "Invalid partition field parent"
_log = logging.getLogger(__name__)


def _metrics(rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, int) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out


def rewrite_data_files(
    session: Any,
    catalog: str,
    table: str,
    *,
    strategy: str = "binpack",
    sort_columns: Sequence[str] = (),
    target_file_size_bytes: int | None = None,
    min_input_files: int | None = None,
    where: str | None = None,
    options: Mapping[str, str] | None = None,
    attempts: int = 4,
    writer_pause_s: float = 300.0,
) -> JobResult:
    """Compact small data files of ``table`` (``ns.name``) into files near the target size.

    While it runs, the table carries a rewrite lease (``REWRITE_LEASE_PROPERTY``, at
    most ``writer_pause_s`` long): Tidelake's upsert writers hold commits that would
    add deletes to the files being rewritten, so the rewrite can commit.

    ``strategy="sort"`` also orders rows by ``sort_columns`` (``"ts"``, ``"id DESC"``, or
    ``"zorder(a,b)"``; empty means the table's sort order). ``min_input_files`` is the
    fewest files a group needs to be rewritten (Iceberg's default is 5). ``where``
    limits the rewrite to rows matching a predicate.
    """
    if strategy not in _STRATEGIES:
        raise MaintenanceJobError(f"unknown rewrite strategy {strategy!r} (binpack or sort)")
    opts: dict[str, str] = {}
    if target_file_size_bytes is not None:
        opts["target-file-size-bytes"] = str(target_file_size_bytes)
    if min_input_files is not None:
        opts["min-input-files"] = str(min_input_files)
    opts.update(options or {})
    arguments: dict[str, Any] = {"table": quote_identifier(table), "strategy": strategy}
    if strategy == "sort" and sort_columns:
        arguments["sort_order"] = ", ".join(sort_columns)
    if where:
        arguments["where"] = where
    if opts:
        arguments["options"] = opts
    start = time.monotonic()
    target = f"{quote_identifier([catalog])}.{quote_identifier(table)}"
    lease_until = int(time.time() * 1000 + writer_pause_s * 1000)
    _set_lease(session, target, str(lease_until))
    try:
        rows = with_conflict_retries(
            lambda: call_procedure(session, catalog, "rewrite_data_files", arguments),
            what=f"rewrite_data_files {table}",
            attempts=attempts,
        )
    finally:
        _set_lease(session, target, None)
    return JobResult("rewrite_data_files", table, _metrics(rows), seconds=time.monotonic() - start)


def _set_lease(session: Any, target: str, value: str | None) -> None:
    if value is None:
        sql = f"ALTER TABLE {target} UNSET TBLPROPERTIES IF EXISTS ({sql_string(REWRITE_LEASE_PROPERTY)})"
    else:
        sql = (
            f"ALTER TABLE {target} SET TBLPROPERTIES "
            f"({sql_string(REWRITE_LEASE_PROPERTY)} = {sql_string(value)})"
        )
    with_conflict_retries(lambda: session.sql(sql).collect(), what=f"lease on {target}")


def rewrite_manifests(session: Any, catalog: str, table: str, *, attempts: int = 4) -> JobResult:
    """Regroup the manifests of ``table`` so that scan planning reads few, well-clustered ones."""
    start = time.monotonic()
    rows = with_conflict_retries(
        lambda: call_procedure(
            session, catalog, "rewrite_manifests", {"table": quote_identifier(table)}
        ),
        what=f"rewrite_manifests {table}",
        attempts=attempts,
    )
    return JobResult("rewrite_manifests", table, _metrics(rows), seconds=time.monotonic() - start)


def rewrite_position_delete_files(
    session: Any,
    catalog: str,
    table: str,
    *,
    options: Mapping[str, str] | None = None,
    attempts: int = 4,
) -> JobResult:
    """Compact position delete files and drop deletes that point at removed data files.

    Iceberg 1.10's procedure cannot read the deletes of a table with a list or map
    column (apache/iceberg#15080: "Invalid partition field parent"), and every table
    topic has one (``_kafka_headers``). There the job applies the deletes instead:
    it rewrites the data files that have any (``delete-file-threshold`` 1) and removes
    the delete files left dangling, which leaves the table with no deletes at all.
    """
    arguments: dict[str, Any] = {"table": quote_identifier(table)}
    if options:
        arguments["options"] = dict(options)
    start = time.monotonic()
    try:
        rows = with_conflict_retries(
            lambda: call_procedure(session, catalog, "rewrite_position_delete_files", arguments),
            what=f"rewrite_position_delete_files {table}",
            attempts=attempts,
        )
    except MaintenanceJobError as exc:
        if _NESTED_COLUMN_BUG not in str(exc.__cause__ or exc):
            raise
        _log.warning(
            "rewrite_position_delete_files %s: Iceberg cannot read deletes of tables with "
            "list/map columns; applying them with rewrite_data_files instead",
            table,
        )
        folded = rewrite_data_files(
            session,
            catalog,
            table,
            # new files take the commit's sequence number, so every delete file that
            # pointed at the rewritten files is below it: dangling, and removed
            options={
                "delete-file-threshold": "1",
                "remove-dangling-deletes": "true",
                "use-starting-sequence-number": "false",
            },
            attempts=attempts,
        )
        metrics = {**folded.metrics, "deletes_applied_by_data_rewrite": 1}
        return JobResult(
            "rewrite_position_delete_files", table, metrics, seconds=time.monotonic() - start
        )
    return JobResult(
        "rewrite_position_delete_files", table, _metrics(rows), seconds=time.monotonic() - start
    )
