"""The produce path's check of a batch's records, with the walk in C.

:func:`check_records` gives what :func:`ingest.protocol.records.validate_records`
gives (and whether a record has no key, which compacted topics refuse), for
the same input, but walks the inflated records with the C scanner
``ingest.protocol._recordscan`` (built with the package; see its source for
why). The scanner only answers "fine" or "not sure": whenever it is not sure
(a malformed record, a codec error, a count that does not match) the batch
goes through the Python walk, which decides and words the error. Without the
compiled module everything goes through the Python walk.

Inflating stays chunked and bounded (``limit``) as in ``validate_records``;
memory is one chunk plus at most one record cut off by a chunk's end.
"""

from __future__ import annotations

from types import ModuleType
from typing import Protocol

from lz4.frame import LZ4FrameDecompressor

from ingest.protocol.errors import KafkaError
from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Compression,
    InflatedTooLargeError,
    RecordStats,
    inflate,
    validate_records,
)

__all__ = ["check_records", "SCANNER", "NATIVE", "scan_fast"]


class _Scan(Protocol):
    def __call__(
        self,
        data: bytes | bytearray | memoryview,
        pos: int,
        index: int,
        count: int,
        base_ts: int,
        lo: int,
        hi: int,
        /,
    ) -> tuple[int, int, int, int, int] | None: ...


def _native() -> ModuleType | None:
    try:
        from ingest.protocol import _recordscan
    except ImportError:  # not built (a source checkout without `pip install -e .`)
        return None
    return _recordscan


NATIVE = _native()
"""The compiled module (``scan``, ``starts``, ``gather``), or None."""
SCANNER: _Scan | None = NATIVE.scan if NATIVE is not None else None
# Inflate chunk: 256 KiB walked a 1 MiB lz4 batch in 187 us here, 64 KiB in
# 283 us (Python per chunk), 1 MiB in 1,393 us (fresh pages faulted in for
# every chunk: glibc maps allocations that size afresh each time).
_CHUNK = 256 * 1024
# An lz4 payload this small (a latency-bound producer's batch: 27 records of
# 1 KiB are about 1.3 KB) is inflated in one call and walked where it lies:
# the chunked path's generator, copies and bookkeeping cost more than the
# inflation itself (10.7 against 5.0 us for that batch, bench/README.md,
# session 23). One that does not come out whole within a chunk, or leaves
# input over, takes the chunked path from the start.
_ONE_PIECE_LZ4 = 4096


def scan_fast(
    buf: memoryview | bytes, h: BatchHeader, limit: int, scanner: _Scan
) -> tuple[RecordStats, bool] | None:
    """The C walk alone: (stats, has a null key), or None when it is not
    sure. Raises ``InflatedTooLargeError`` past ``limit``."""
    body = buf[h.position + BATCH_HEADER_SIZE : h.position + h.size]
    count = h.records_count
    lo = hi = base_ts = h.base_timestamp
    if h.compression == Compression.NONE:
        # the records are the payload itself: walk it where it lies (no copy)
        if len(body) > limit:
            raise InflatedTooLargeError(f"the record batch inflates to more than {limit} bytes")
        found = scanner(body, 0, 0, count, base_ts, lo, hi)
        if found is None or found[1] != count or found[0] != len(body):
            return None
        return RecordStats(found[2], found[3]), found[4] > 0
    if h.compression == Compression.LZ4 and len(body) <= _ONE_PIECE_LZ4:
        whole = _lz4_one_piece(body)
        if whole is not None:
            if len(whole) > limit:
                raise InflatedTooLargeError(
                    f"the record batch inflates to more than {limit} bytes"
                )
            found = scanner(whole, 0, 0, count, base_ts, lo, hi)
            if found is None or found[1] != count or found[0] != len(whole):
                return None
            return RecordStats(found[2], found[3]), found[4] > 0
    data = bytearray()
    pos = index = null_keys = 0
    try:
        for chunk in inflate(h.compression, body, limit, _CHUNK):
            if pos:
                del data[:pos]
            data += chunk
            found = scanner(data, 0, index, count, base_ts, lo, hi)
            if found is None:
                return None
            pos, index, lo, hi, nulls = found
            null_keys += nulls
    except KafkaError:
        raise  # too large: the same answer either way
    except Exception:  # noqa: BLE001 - a codec's own error: the Python walk words it
        return None
    if index != count or pos != len(data):
        return None
    return RecordStats(lo, hi), null_keys > 0


def _lz4_one_piece(body: memoryview | bytes) -> bytes | None:
    """The whole of a small lz4 payload, when it is one frame that inflates
    to at most one chunk; None otherwise (or on a codec error: the chunked
    path, then the Python walk, decide and word it)."""
    d = LZ4FrameDecompressor()
    try:
        out: bytes = d.decompress(body, max_length=_CHUNK)
    except Exception:  # noqa: BLE001 - the codec's own error: the other paths word it
        return None
    if not out or not d.eof or d.unused_data:
        return None  # nothing inflated (an empty frame): the chunked path words it
    return out


def check_records(
    buf: memoryview | bytes, h: BatchHeader, limit: int = 1 << 62
) -> tuple[RecordStats, bool | None]:
    """Validate a batch's records as ``validate_records`` does; also whether
    one has a null key (None: not known, the caller checks if it needs to)."""
    if SCANNER is not None:
        fast = scan_fast(buf, h, limit, SCANNER)
        if fast is not None:
            return fast
    return validate_records(buf, h, limit), None
