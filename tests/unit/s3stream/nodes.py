"""Engine settings for tests that run several brokers' engines on one store."""

from __future__ import annotations

from pathlib import Path

from ingest.s3stream import S3StreamConfig

MIB = 1 << 20


def node_config(tmp_path: Path, node: int) -> S3StreamConfig:
    """Broker ``node``'s engine: its own WAL directory and object prefix, uploads
    only when asked (a flush), small caches."""
    return S3StreamConfig.model_validate(
        {
            "wal_dir": tmp_path / f"wal-{node}",
            "object_prefix": f"streams/node-{node}/",
            "upload_size_bytes": 8 * MIB,
            "upload_interval_ms": 60_000,
            "log_cache_bytes": MIB,
            "block_cache_bytes": 4 * MIB,
        }
    )
