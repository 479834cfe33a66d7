"""The write-ahead log: durable, ordered, group-committed appends."""

from __future__ import annotations

from ingest.s3stream.wal.api import WalAppend, WalRecord, WriteAheadLog
from ingest.s3stream.wal.file import FileWriteAheadLog
from ingest.s3stream.wal.object import ObjectWriteAheadLog

__all__ = ["FileWriteAheadLog", "ObjectWriteAheadLog", "WalAppend", "WalRecord", "WriteAheadLog"]
