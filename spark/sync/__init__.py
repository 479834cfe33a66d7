"""Catalog sync: mirror the platform's tables into Glue, a Hive Metastore or REST catalogs."""

from spark.sync.mirror import SyncChange, SyncReport, sync_catalogs
from spark.sync.targets import mirror_target

__all__ = ["SyncChange", "SyncReport", "mirror_target", "sync_catalogs"]
