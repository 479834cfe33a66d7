"""The checks of a produce payload's records before it is appended.

:func:`validate` walks every batch's records (through the C walk of
:mod:`ingest.protocol.record_scan`), inflating compressed ones in bounded
chunks, and refuses null keys for a compacted topic. :class:`PartitionLog`
runs it on the event loop up to ``INLINE_INFLATE_BYTES`` and in
:func:`validators` beyond.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ingest.log.topic_config import TopicConfig
from ingest.protocol.record_scan import check_records
from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    RecordStats,
    decompress,
    read_varint,
)

__all__ = ["VALIDATOR_THREADS", "INLINE_INFLATE_BYTES", "Prepared", "validate", "validators"]

VALIDATOR_THREADS = 2
INLINE_INFLATE_BYTES = 2 * 1024 * 1024
"""A compressed payload is first checked on the event loop, inflating at most
this much (about 0.4 ms here with the C record walk); only one that inflates
further goes to the worker threads. A hop to a worker and back cost more
than the whole check of a typical batch (a 1 MiB librdkafka batch: 0.2 ms),
and a produce's latency is the sum of such hops."""
_validator_pool: ThreadPoolExecutor | None = None
_validator_lock = threading.Lock()


def validators() -> ThreadPoolExecutor:
    """The worker threads that inflate and check compressed batches (shared,
    created on first use; a few threads: a bomb occupies one, not the loop)."""
    global _validator_pool
    with _validator_lock:
        if _validator_pool is None:
            _validator_pool = ThreadPoolExecutor(VALIDATOR_THREADS, "batch-check")
        return _validator_pool


@dataclass(slots=True)
class Prepared:
    buf: memoryview  # the client's batches, read in place
    headers: list[BatchHeader]
    config: TopicConfig
    inflate_limit: int
    require_keys: bool = False  # a compacted topic


def validate(prepared: Prepared, limit: int | None = None) -> list[RecordStats]:
    """Walk every batch's records (inflating in bounded chunks, to ``limit``
    or the batch's own inflate limit); thread-safe."""
    view = memoryview(prepared.buf)
    bound = prepared.inflate_limit if limit is None else limit
    try:
        checked = [check_records(view, h, bound) for h in prepared.headers]
        if prepared.require_keys:
            for h, (_, null_key) in zip(prepared.headers, checked, strict=True):
                if h.is_control:
                    continue
                if null_key or (null_key is None and _has_null_key(view, h)):
                    raise InvalidRecordError("Compacted topic cannot accept message without key")
        return [stats for stats, _ in checked]
    finally:
        view.release()


def _has_null_key(view: memoryview, h: BatchHeader) -> bool:
    """A record of the (already validated) batch has a null key: only each
    record's length, attributes, deltas and key length are read."""
    body = bytes(view[h.position + BATCH_HEADER_SIZE : h.position + h.size])
    data = decompress(h.compression, body) if h.compression else body
    pos = 0
    try:
        for _ in range(h.records_count):
            length, pos = read_varint(data, pos)
            end = pos + length
            _ts, p = read_varint(data, pos + 1)  # after the attributes byte
            _off, p = read_varint(data, p)
            klen, _ = read_varint(data, p)
            if klen < 0:
                return True
            pos = end
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc
    return False
