"""Settings of the S3Stream engine."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["S3StreamConfig"]

_MIB = 1024 * 1024


class S3StreamConfig(BaseModel):
    """Tuning of one engine. Built by the process assembly and passed down
    (``[storage]`` in the config file, ``TIDELAKE_STORAGE_<FIELD>`` in the
    environment).

    ``wal_dir`` and the ``wal_*`` keys are used by
    :func:`~ingest.s3stream.factory.open_engine` to build the WAL.

    Memory: the engine holds at most ``log_cache_bytes`` of uploaded data plus
    everything not yet uploaded (capped by ``max_pending_upload_bytes``), and
    ``block_cache_bytes`` of object ranges (on S3, in the store's recycled
    read buffers, which keep up to that plus the read-ahead in flight while
    idle). On top of that, transiently:
    encoded uploads in flight (``upload_parallelism`` x ``upload_size_bytes``),
    one compaction pass (about 2 x ``compaction_target_bytes`` or
    ``stream_object_target_bytes``: the ranges read and the merged object),
    read-ahead ranges being loaded, and the object WAL's batches in flight
    (``wal_max_in_flight`` x ``wal_batch_bytes``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wal_kind: Literal["file", "object"] = "file"
    """``file``: segment files in ``wal_dir`` (lowest latency, local state).
    ``object``: WAL batches written as objects under ``wal_object_prefix`` of
    the object store (no local state: any broker can recover the data)."""
    wal_dir: Path | None = None
    wal_object_prefix: str = "wal/"
    """Key prefix of the object WAL (one writer per prefix; not under ``object_prefix``)."""
    wal_batch_interval_ms: float = Field(default=5.0, ge=0)
    """Object WAL: gather appends this long before putting one WAL object..."""
    wal_batch_bytes: int = Field(default=4 * _MIB, ge=1)
    """...or until this many bytes are queued."""
    wal_max_in_flight: int = Field(default=4, ge=1)
    """Object WAL: WAL objects put concurrently (acknowledged in order)."""
    wal_segment_bytes: int = Field(default=64 * _MIB, ge=1 * _MIB)
    """File WAL: a new segment file starts at this size."""
    wal_recycled_segments: int = Field(default=2, ge=0)
    """File WAL: trimmed segments kept to be overwritten as new ones rather than
    deleted (a delete's journal commit stalls concurrent fsyncs); 0 deletes them."""
    wal_prefill_bytes: int = Field(default=1 * _MIB, ge=0)
    """File WAL: an idle writer keeps the active segment written with zeros this
    far ahead of its last record, so that a record's fdatasync does not also
    commit a larger file size (a journal commit); 0 turns it off."""
    wal_sync_depth: int = Field(default=2, ge=1, le=4)
    """File WAL, C writer: group commits in flight at once; the next group is
    written and its fdatasync started while an earlier one's runs (each is
    acknowledged after the ones before it); 1: one at a time."""
    wal_writer: Literal["c", "python"] = "c"
    """File WAL: the group-commit writer thread, the C one that never takes the
    GIL (the default; the Python one, with a warning, where it is not built) or
    the Python one (for comparison; the same on disk)."""
    wal_writer_replies: bool = True
    """File WAL, C writer: a Produce response whose records are being synced
    is sent by the writer thread itself right after the fdatasync, not by the
    event loop once it has heard of it (plain TCP connections; see
    ``ingest/server/lent_reply.py``); false: the loop writes every response."""
    file_object_writeback_bytes: int = Field(default=64 * 1024, ge=0)
    """A ``file://`` object store writes each object this many bytes at a
    time, each step on the disk before the next, so that a file WAL on the
    same disk does not wait behind a whole object's writeback (0: write it in
    one go, then fsync)."""
    upload_size_bytes: int = Field(default=8 * _MIB, ge=1)
    """Upload a stream set object once this many un-uploaded bytes are durable."""
    upload_interval_ms: int = Field(default=2000, ge=1)
    """...or once this long has passed since the last upload (if anything is pending)."""
    upload_parallelism: int = Field(default=4, ge=1)
    """Objects put concurrently (committed in order); S3 needs several."""
    stream_object_bytes: int = Field(default=4 * _MIB, ge=1)
    """A stream with at least this much data in one upload gets its own
    stream object; the rest share a stream set object."""
    log_cache_bytes: int = Field(default=256 * _MIB, ge=1 * _MIB)
    max_pending_upload_bytes: int = Field(default=512 * _MIB, ge=1 * _MIB)
    """Refuse appends (``StreamBackpressureError``) while this much appended
    data waits for upload; the log cache holds all of it in memory."""
    block_cache_bytes: int = Field(default=128 * _MIB, ge=0)
    read_ahead_ranges: int = Field(default=4, ge=0)
    """On a read from objects, prefetch this many following object ranges of
    the stream into the block cache (sequential catch-up reads). With the
    range being read, up to this many + 1 GETs are in flight per reader."""
    object_prefix: str = "streams/"
    """Key prefix of the objects this engine writes."""
    gc_interval_ms: int = Field(default=30_000, ge=1)
    """How often to delete objects whose every range is trimmed or deleted."""
    compaction_interval_ms: int = Field(default=60_000, ge=1)
    """How often to run one compaction pass (merge small or mostly-trimmed objects)."""
    compaction_small_bytes: int = Field(default=4 * _MIB, ge=0)
    """Objects below this size are merged with others."""
    compaction_target_bytes: int = Field(default=32 * _MIB, ge=1)
    """A compaction pass writes one object of up to about this size."""
    stream_object_target_bytes: int = Field(default=64 * _MIB, ge=1)
    """Consecutive stream objects of a stream are merged up to about this size."""
    sweep_orphans_on_start: bool = True
    """On start, delete objects under ``object_prefix`` that the metadata store
    does not know (left by a crash between an object's put and its commit).
    Only safe when this engine is the sole writer under ``object_prefix``."""
    network_bytes_per_second: int = Field(default=0, ge=0)
    """Total object-store bandwidth for limited traffic (0: no limit). Produce
    (WAL and uploads) is never limited; the classes below get shares of it."""
    network_busy_bytes_per_second: int = Field(default=100_000_000, ge=0)
    """While anything has been produced within the last second, catch-up
    reads from objects and compaction share at most this rate (0: no such
    cap), so they cannot push produce latency up; with no produce they run at
    ``network_bytes_per_second``. Tail reads and table writes, which keep up
    with produce, are not held back by it."""
    network_share_tail_read: float = Field(default=1.0, ge=0)
    network_share_catch_up_read: float = Field(default=0.5, ge=0)
    network_share_compaction: float = Field(default=0.2, ge=0)
    network_share_table_write: float = Field(default=0.3, ge=0)
    verify_checksums: bool = True
    """Check each batch's CRC32C when reading from objects."""
