"""Errors of the S3Stream engine."""

from __future__ import annotations

from ingest.errors import StorageError

__all__ = [
    "StreamError",
    "UnknownStreamError",
    "OffsetOutOfRangeError",
    "StreamFencedError",
    "WalFencedError",
    "StreamBackpressureError",
    "ObjectNotFoundError",
    "ObjectExistsError",
    "EngineClosedError",
]


class StreamError(StorageError):
    """Base of the stream engine's errors."""


class UnknownStreamError(StreamError):
    """No live stream with that id."""


class OffsetOutOfRangeError(StreamError):
    """A fetch or trim offset outside [start_offset, confirm_offset]."""


class StreamFencedError(StreamError):
    """The engine hit an unrecoverable write error; it accepts no more appends."""


class WalFencedError(StreamFencedError):
    """Another broker recovered this write-ahead log and fenced it: its appends
    are refused and none still pending is ever acknowledged (the successor owns
    the data; this broker must stop serving it)."""


class StreamBackpressureError(StreamError):
    """Too much data waits for upload (object storage is slow or down); the
    append was refused before taking an offset. Retriable: try again later."""


class EngineClosedError(StreamError):
    """The engine is closed (or not started)."""


class ObjectNotFoundError(StorageError):
    """The object store has no object with that key."""


class ObjectExistsError(StorageError):
    """A create-only put (``if_absent=True``) found an object under that key."""
