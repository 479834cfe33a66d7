"""The root of Tidelake's error hierarchy.

Every error Tidelake raises on purpose derives from :class:`TidelakeError`; each
package has one base below it (``StorageError`` here, ``KafkaError`` in
``ingest.protocol.errors``, ``SchemaRegistryError`` in ``schema_registry``...).
``ingest`` imports nothing of ours, so the root lives here and the other rooms
import it from ``ingest.errors``. (``catalog`` imports nothing of ours either;
its errors are pyiceberg's exceptions, which the REST service maps to the
Iceberg REST error model.)
"""

from __future__ import annotations

__all__ = ["TidelakeError", "ConfigError", "StorageError", "CorruptDataError"]


class TidelakeError(Exception):
    """Root of every error Tidelake raises on purpose."""


class ConfigError(TidelakeError):
    """Invalid configuration; the message names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"invalid configuration {key!r}: {message}")
        self.key = key


class StorageError(TidelakeError):
    """Base for storage-engine errors (WAL, object store, metadata store)."""


class CorruptDataError(StorageError):
    """Stored bytes failed a checksum or structural check."""
