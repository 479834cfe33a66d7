"""Finding, describing and maintaining the Delta tables of table topics (delta-rs; blocking).

Maintenance follows the same policy object as the Iceberg jobs (``spark.policy.
MaintenancePolicy``, passed in; this room does not import ``spark``), read as:

- ``optimize`` (compaction, ``DeltaTable.optimize.compact``) when at least
  ``min_small_files`` files are smaller than ``small_file_ratio`` x
  ``target_file_size_bytes``, to files of ``target_file_size_bytes``;
- ``checkpoint`` (``create_checkpoint`` then ``cleanup_metadata``) when the log has
  grown by more than ``max_snapshots`` versions since the last checkpoint;
- ``vacuum`` when ``remove_orphans``: data files no version within
  ``orphan_min_age_seconds`` (at least 24 h) references are deleted, which also
  removes Parquet files of commits that never reached the log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import pyarrow as pa
from deltalake import DeltaTable

from table_topic.delta.location import DeltaLocation, object_filesystem, root_path
from table_topic.delta.sink import OFFSETS_KEY, open_delta_table

__all__ = [
    "DELTA_JOBS",
    "DeltaJobResult",
    "DeltaPolicy",
    "DeltaTableInfo",
    "describe_delta_table",
    "list_delta_tables",
    "plan_delta",
    "run_delta_maintenance",
]

DELTA_JOBS = ("optimize", "checkpoint", "vacuum")


class DeltaPolicy(Protocol):
    """The fields of the maintenance policy the Delta jobs read."""

    target_file_size_bytes: int
    min_small_files: int
    max_snapshots: int
    remove_orphans: bool
    orphan_min_age_seconds: float

    def small_file_bytes(self) -> int: ...

    def selects(self, table: str) -> bool: ...


@dataclass
class DeltaTableInfo:
    """One Delta table: where, its version, files and (for a table topic) its offsets."""

    table: str
    uri: str
    format: str = "delta"
    version: int = 0
    files: int = 0
    small_files: int = 0
    rows: int = 0
    partition_columns: list[str] = field(default_factory=list)
    schema: list[dict[str, str]] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    last_checkpoint: int | None = None
    planned: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DeltaJobResult:
    table: str
    job: str
    metrics: dict[str, Any]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "job": self.job, "metrics": self.metrics, "format": "delta"}


def list_delta_tables(location: DeltaLocation, max_depth: int = 6) -> list[tuple[str, str]]:
    """``(namespace.table, uri)`` of every Delta table under the root."""
    fs = object_filesystem(location)
    root = root_path(location).rstrip("/")
    if not fs.exists(root):
        return []
    out: list[tuple[str, str]] = []
    frontier = [root]
    for _ in range(max_depth):
        nxt: list[str] = []
        for folder in frontier:
            for entry in fs.ls(folder, detail=True):
                if entry.get("type") != "directory":
                    continue
                path = str(entry["name"]).rstrip("/")
                if fs.exists(f"{path}/_delta_log"):
                    rel = path[len(root.lstrip("/")) :] if not location.local else path[len(root) :]
                    name = ".".join(p for p in rel.strip("/").split("/") if p)
                    uri = path if location.local else location.root + "/" + rel.strip("/")
                    out.append((name, uri))
                elif not path.endswith("_delta_log"):
                    nxt.append(path)
        frontier = nxt
    return sorted(out)


def _last_checkpoint(location: DeltaLocation, uri: str) -> int | None:
    fs = object_filesystem(location)
    path = (uri if location.local else uri.split("://", 1)[1]) + "/_delta_log/_last_checkpoint"
    try:
        with fs.open(path, "rb") as f:
            return int(json.loads(f.read())["version"])
    except (FileNotFoundError, KeyError, ValueError):
        return None


def describe_delta_table(
    location: DeltaLocation, name: str, uri: str, policy: DeltaPolicy | None = None
) -> DeltaTableInfo:
    table = DeltaTable(uri, storage_options=location.storage_options or None)
    adds = pa.table(table.get_add_actions(flatten=True))
    sizes = adds.column("size_bytes").to_pylist() if adds.num_rows else []
    rows = adds.column("num_records").to_pylist() if "num_records" in adds.column_names else []
    small = policy.small_file_bytes() if policy is not None else 0
    info = DeltaTableInfo(
        table=name,
        uri=uri,
        version=table.version(),
        files=len(sizes),
        small_files=sum(1 for s in sizes if s < small),
        rows=sum(r or 0 for r in rows),
        partition_columns=list(table.metadata().partition_columns),
        schema=[
            {"name": f.name, "type": str(f.type)} for f in pa.schema(table.schema().to_arrow())
        ],
        last_checkpoint=_last_checkpoint(location, uri),
    )
    for entry in table.history(10):
        text = entry.get(OFFSETS_KEY)
        if text:
            info.offsets = json.loads(text) if isinstance(text, str) else dict(text)
            break
    if policy is not None:
        info.planned = plan_delta(info, policy)
    return info


def plan_delta(info: DeltaTableInfo, policy: DeltaPolicy) -> list[dict[str, str]]:
    planned: list[dict[str, str]] = []
    if info.small_files >= policy.min_small_files:
        planned.append(
            {
                "job": "optimize",
                "reason": f"{info.small_files} small files (>= {policy.min_small_files})",
            }
        )
    since = info.version - (info.last_checkpoint if info.last_checkpoint is not None else -1)
    if since > policy.max_snapshots:
        planned.append(
            {"job": "checkpoint", "reason": f"{since} versions since the last checkpoint"}
        )
    if policy.remove_orphans:
        planned.append(
            {
                "job": "vacuum",
                "reason": f"files unreferenced for {policy.orphan_min_age_seconds:.0f} s",
            }
        )
    return planned


def run_delta_maintenance(
    location: DeltaLocation,
    policy: DeltaPolicy,
    tables: Sequence[str] | None = None,
    jobs: Sequence[str] | None = None,
    force: bool = False,
) -> tuple[list[DeltaJobResult], list[tuple[str, str, str]]]:
    """Run the planned (or, with ``force``, all) Delta jobs; results and (table, job, error)."""
    results: list[DeltaJobResult] = []
    errors: list[tuple[str, str, str]] = []
    for name, uri in list_delta_tables(location):
        if (tables and name not in tables) or not policy.selects(name):
            continue
        try:
            info = describe_delta_table(location, name, uri, policy)
        except Exception as exc:  # one broken table does not stop the others
            errors.append((name, "describe", str(exc)))
            continue
        wanted = list(DELTA_JOBS) if force else [p["job"] for p in info.planned]
        for job in wanted:
            if jobs and job not in jobs:
                continue
            started = time.monotonic()
            try:
                metrics = _run_job(location, uri, job, policy)
            except Exception as exc:  # report and go on with the next job
                errors.append((name, job, str(exc)))
                continue
            results.append(DeltaJobResult(name, job, metrics, time.monotonic() - started))
    return results, errors


def _run_job(location: DeltaLocation, uri: str, job: str, policy: DeltaPolicy) -> dict[str, Any]:
    table = open_delta_table(uri, location.storage_options)
    if table is None:
        raise FileNotFoundError(uri)
    if job == "optimize":
        m = table.optimize.compact(target_size=policy.target_file_size_bytes)
        return {
            "files_added": m.get("numFilesAdded", 0),
            "files_removed": m.get("numFilesRemoved", 0),
        }
    if job == "checkpoint":
        table.create_checkpoint()
        table.cleanup_metadata()  # log entries older than the log retention
        return {"checkpoint_version": table.version()}
    if job == "vacuum":
        hours = max(int(policy.orphan_min_age_seconds // 3600), 24)
        # full: also Parquet files no version ever named (a commit a crash cut short);
        # the policy's own minimum age (>= 24 h) stands in for Delta's 7-day default
        deleted = table.vacuum(
            retention_hours=hours, dry_run=False, enforce_retention_duration=False, full=True
        )
        return {"files_deleted": len(deleted)}
    raise ValueError(f"unknown Delta job {job!r} (expected one of {', '.join(DELTA_JOBS)})")
