"""S3Stream: streams on a write-ahead log, caches and object storage.

Assembly (the broker)::

    metadata = open_metadata_store("sqlite:////data/metadata.db")
    objects = open_object_store("file:///data/objects")      # or s3://bucket/prefix
    engine = open_engine(S3StreamConfig(wal_dir="/data/wal"), metadata, objects)
    # or, with no local state: S3StreamConfig(wal_kind="object") (WAL batches
    # as objects under wal_object_prefix; any broker can recover them)
    await engine.start()                       # recovers: WAL replay on top of objects
    stream = await engine.create_stream()      # or open_stream(stream_id)
    ...
    await engine.close(); await objects.close(); metadata.close()

Errors (all ``StorageError``): ``Stream.append`` raises synchronously, before
taking an offset, ``StreamBackpressureError`` (retriable: uploads are behind),
``StreamFencedError`` (a WAL write failed, or, as ``WalFencedError``, another
broker recovered the object WAL and owns it now; restart), ``EngineClosedError``
or ``UnknownStreamError``; its awaitable fails with ``StorageError`` if the WAL
write fails. ``fetch`` and ``trim`` raise ``OffsetOutOfRangeError`` outside
``[start_offset, confirm_offset]``.
"""

from __future__ import annotations

from ingest.s3stream.api import Stream, StreamBatch, StreamEngine
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.engine import S3StreamEngine
from ingest.s3stream.errors import (
    EngineClosedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OffsetOutOfRangeError,
    StreamBackpressureError,
    StreamError,
    StreamFencedError,
    UnknownStreamError,
    WalFencedError,
)
from ingest.s3stream.factory import open_engine
from ingest.s3stream.memory_engine import MemoryStreamEngine
from ingest.s3stream.network import NetworkRateLimiter, TrafficClass
from ingest.s3stream.objectstore import ObjectStore, open_object_store
from ingest.s3stream.wal import FileWriteAheadLog, ObjectWriteAheadLog, WriteAheadLog

__all__ = [
    "EngineClosedError",
    "FileWriteAheadLog",
    "MemoryStreamEngine",
    "NetworkRateLimiter",
    "ObjectWriteAheadLog",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "ObjectStore",
    "OffsetOutOfRangeError",
    "S3StreamConfig",
    "S3StreamEngine",
    "Stream",
    "StreamBatch",
    "StreamEngine",
    "StreamBackpressureError",
    "StreamError",
    "StreamFencedError",
    "WalFencedError",
    "TrafficClass",
    "UnknownStreamError",
    "WriteAheadLog",
    "open_engine",
    "open_object_store",
]
