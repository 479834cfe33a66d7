"""Maintenance jobs on Iceberg tables, run through Iceberg's Spark procedures and actions."""

from spark.jobs.cleanup import OFFSETS_PROPERTY, expire_snapshots, remove_orphan_files
from spark.jobs.result import JobResult
from spark.jobs.rewrite import rewrite_data_files, rewrite_manifests, rewrite_position_delete_files

__all__ = [
    "OFFSETS_PROPERTY",
    "JobResult",
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_data_files",
    "rewrite_manifests",
    "rewrite_position_delete_files",
]
