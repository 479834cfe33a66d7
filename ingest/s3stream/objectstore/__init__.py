"""Object store backends (memory, local directory, S3), chosen by URL scheme."""

from __future__ import annotations

from ingest.s3stream.objectstore.api import ObjectInfo, ObjectStore
from ingest.s3stream.objectstore.factory import open_object_store
from ingest.s3stream.objectstore.file import FileObjectStore
from ingest.s3stream.objectstore.memory import MemoryObjectStore

__all__ = [
    "FileObjectStore",
    "MemoryObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "open_object_store",
]
