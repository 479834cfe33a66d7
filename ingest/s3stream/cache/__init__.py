"""In-memory caches of the S3Stream engine."""

from __future__ import annotations

from ingest.s3stream.cache.block_cache import BlockCache
from ingest.s3stream.cache.log_cache import CacheEntry, LogCache

__all__ = ["BlockCache", "CacheEntry", "LogCache"]
