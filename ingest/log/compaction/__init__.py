"""Log compaction (``cleanup.policy=compact``): the log cleaner that keeps
the latest record per key of compacted partitions, through the stream
engine's ``Stream.rewrite``."""

from __future__ import annotations

from ingest.log.compaction.cleaner import CleanResult, LogCleaner
from ingest.log.compaction.state import CheckpointStore, CleanerState

__all__ = ["CheckpointStore", "CleanResult", "CleanerState", "LogCleaner"]
