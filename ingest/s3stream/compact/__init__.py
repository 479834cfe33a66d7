"""Compaction of the objects the engine uploads."""

from __future__ import annotations

from ingest.s3stream.compact.compactor import CompactionPolicy, Compactor

__all__ = ["CompactionPolicy", "Compactor"]
