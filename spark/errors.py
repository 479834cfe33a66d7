"""Errors raised by Tidelake's Spark jobs. Every one derives from :class:`SparkJobError`."""

from __future__ import annotations

__all__ = [
    "CatalogSyncError",
    "JarNotFoundError",
    "MaintenanceJobError",
    "SparkJobError",
    "SparkUnavailableError",
]


class SparkJobError(Exception):
    """Root of the errors of the ``spark`` package."""


class SparkUnavailableError(SparkJobError):
    """Java, pyspark or the Iceberg runtime jar is missing; the message says how to get it."""


class JarNotFoundError(SparkUnavailableError):
    """A jar the session needs was not found in the installed packages."""


class MaintenanceJobError(SparkJobError):
    """A maintenance procedure failed (after its retries)."""


class CatalogSyncError(SparkJobError):
    """Mirroring a table into another catalog failed."""
