"""Assemble an S3Stream engine from settings."""

from __future__ import annotations

import logging

from ingest.errors import ConfigError
from ingest.metadata.api import MetadataStore
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.engine import S3StreamEngine
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.s3stream.wal import file as file_wal
from ingest.s3stream.wal.api import WriteAheadLog
from ingest.s3stream.wal.file import FileWriteAheadLog
from ingest.s3stream.wal.object import ObjectWriteAheadLog

log = logging.getLogger(__name__)

__all__ = ["open_engine", "open_wal"]


def open_engine(
    config: S3StreamConfig, metadata: MetadataStore, objects: ObjectStore
) -> S3StreamEngine:
    """An engine with the WAL ``config.wal_kind`` names: a
    :class:`FileWriteAheadLog` in ``config.wal_dir`` or an
    :class:`ObjectWriteAheadLog` under ``config.wal_object_prefix`` of ``objects``.

    Call ``await engine.start()`` before use and ``await engine.close()`` at the end.
    """
    return S3StreamEngine(config, metadata, objects, open_wal(config, objects))


def open_wal(config: S3StreamConfig, objects: ObjectStore) -> WriteAheadLog:
    """The write-ahead log ``config.wal_kind`` names."""
    if config.wal_kind == "object":
        prefix = config.wal_object_prefix
        if not prefix or prefix.startswith(config.object_prefix):
            raise ConfigError(
                "storage.wal_object_prefix", "must be set and not under object_prefix"
            )
        return ObjectWriteAheadLog(
            objects,
            prefix,
            batch_interval_ms=config.wal_batch_interval_ms,
            batch_bytes=config.wal_batch_bytes,
            max_in_flight=config.wal_max_in_flight,
        )
    if config.wal_dir is None:
        raise ConfigError("storage.wal_dir", "the file WAL needs a directory")
    if config.wal_writer == "c" and not file_wal.NATIVE:
        log.warning("the C WAL writer is not built here: the file WAL commits on a Python thread")
    return FileWriteAheadLog(
        config.wal_dir,
        segment_bytes=config.wal_segment_bytes,
        recycled_segments=config.wal_recycled_segments,
        prefill_bytes=config.wal_prefill_bytes,
        sync_depth=config.wal_sync_depth,
        native=file_wal.NATIVE and config.wal_writer == "c",
        writer_replies=config.wal_writer_replies,
    )
