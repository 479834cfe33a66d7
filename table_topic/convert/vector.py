"""The vectorised fast path: whole record batches to Arrow without per-record Python objects.

Taken when a chunk is the common shape: every value framed with the SAME
Confluent schema id of a flat Avro record (the bulk decoder's case), raw keys,
no headers, no null values. Record boundaries are found with one small loop
over record lengths; every other field (timestamp and offset deltas, key and
value lengths and positions) is decoded for all records at once with numpy;
value bodies are gathered into one buffer that is a ready Avro container block.
Anything else returns None and the general path converts the chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ingest.protocol.record_scan import NATIVE
from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    decompress,  # the broker's codec table
)
from table_topic.config import ConvertType, TableTopicConfig
from table_topic.convert.chunk import ConvertedChunk, assemble_columns
from table_topic.decode.avro import AvroDecoder
from table_topic.decode.avro_bulk import bulk_available, decode_container_block
from table_topic.decode.resolver import LookupPending, SchemaResolver
from table_topic.errors import InvalidDataError

__all__ = ["convert_vectorised"]

_PAD = 16


def _starts(data: bytes, count: int) -> np.ndarray:
    """Where each of the ``count`` records of ``data`` starts (int64), in C
    when built: the Python loop below was a tenth of a chunk's conversion."""
    if NATIVE is None:
        return np.asarray(_record_starts(data, count), np.int64)
    try:
        return np.frombuffer(NATIVE.starts(data, count), np.int64)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from exc


def _record_starts(data: bytes, count: int) -> list[int]:
    starts = []
    pos = 0
    for _ in range(count):
        starts.append(pos)
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            u = 0
            shift = 0
            while True:
                b = data[pos]
                pos += 1
                u |= (b & 0x7F) << shift
                if not b & 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise CorruptRecordError("varint too long")
            length = (u >> 1) ^ -(u & 1)
        pos += length
    if pos != len(data):
        raise CorruptRecordError("record batch length mismatch")
    return starts


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at ``pos`` for every record: (values, positions after them)."""
    value = np.zeros(len(pos), np.uint64)
    done = np.zeros(len(pos), bool)
    q = pos.copy()
    for k in range(10):
        b = buf[q].astype(np.uint64)
        value |= np.where(done, np.uint64(0), (b & np.uint64(0x7F)) << np.uint64(7 * k))
        cont = (b & np.uint64(0x80)) != 0
        q = np.where(done, q, q + 1)
        done |= ~cont
        if done.all():
            break
    else:
        raise CorruptRecordError("varint too long")
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -((value & np.uint64(1)).astype(np.int64))
    return signed, q


def _fields(arr: np.ndarray, pos: np.ndarray) -> list[np.ndarray] | None:
    """Per record: timestamp delta, offset delta, key length, key start, value
    length, value start; None for a record with a null or unframed value or
    with headers (the general path takes those). In C when built (one pass over each record;
    six numpy varint passes were a sixth of a chunk's conversion); the C walk
    leaves anything unusual to the numpy walk below, which decides."""
    if NATIVE is not None:
        found = NATIVE.fields(arr, pos)
        if found is not None:
            return list(np.frombuffer(found, np.int64).reshape(6, len(pos)))
    length, pos = _varints(arr, pos)
    end = pos + length
    pos = pos + 1  # attributes
    ts_delta, pos = _varints(arr, pos)
    off_delta, pos = _varints(arr, pos)
    klen, pos = _varints(arr, pos)
    kstart = pos
    pos = pos + np.maximum(klen, 0)
    vlen, pos = _varints(arr, pos)
    vstart = pos
    if (vlen < 5).any():
        return None  # null or unframed values: the general path dead-letters them
    pos = pos + vlen
    if (arr[pos] != 0).any():
        return None  # headers
    if not np.array_equal(pos + 1, end):
        raise CorruptRecordError("record length mismatch")
    return [ts_delta, off_delta, klen, kstart, vlen, vstart]


def _gather(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate buf[starts[i]:starts[i]+lengths[i]]: (bytes, int64 offsets).

    In C when built (a memcpy per range); the numpy gather below builds an
    int64 index per byte, and was nearly half of a chunk's conversion."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, np.uint8), offsets
    if NATIVE is not None:
        gathered = NATIVE.gather(
            buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64)
        )
        return np.frombuffer(gathered, np.uint8), offsets
    idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return buf[idx], offsets


def convert_vectorised(
    partition: int,
    batches: Sequence[tuple[bytes | memoryview, BatchHeader]],
    start: int,
    next_offset: int,
    cfg: TableTopicConfig,
    resolver: SchemaResolver,
) -> ConvertedChunk | None:
    if cfg.value_type is not ConvertType.BY_SCHEMA_ID or cfg.key_type is not ConvertType.RAW:
        return None
    if not bulk_available():
        return None
    parts: list[bytes] = []
    rec_starts: list[np.ndarray] = []
    base_offsets: list[np.ndarray] = []
    base_ts: list[np.ndarray] = []
    lat: list[np.ndarray] = []
    total = 0
    for buf, h in batches:
        if h.is_control or h.records_count == 0:
            continue
        body = bytes(buf[h.position + BATCH_HEADER_SIZE : h.position + h.size])
        data = decompress(h.compression, body)
        starts = _starts(data, h.records_count) + total
        rec_starts.append(starts)
        n = h.records_count
        base_offsets.append(np.full(n, h.base_offset, np.int64))
        base_ts.append(
            np.full(n, h.max_timestamp if h.log_append_time else h.base_timestamp, np.int64)
        )
        lat.append(np.full(n, h.log_append_time, bool))
        parts.append(data)
        total += len(data)
    if not parts:
        return None
    buf_bytes = b"".join(parts) + b"\x00" * _PAD
    arr = np.frombuffer(buf_bytes, np.uint8)
    walked = _fields(arr, np.concatenate(rec_starts))
    if walked is None:
        return None
    ts_delta, off_delta, klen, kstart, vlen, vstart = walked
    if (vlen < 5).any():
        return None  # unframed values: the general path dead-letters them
    offsets = np.concatenate(base_offsets) + off_delta
    timestamps = np.where(
        np.concatenate(lat), np.concatenate(base_ts), np.concatenate(base_ts) + ts_delta
    )
    keep = offsets >= start
    if not keep.all():
        offsets, timestamps = offsets[keep], timestamps[keep]
        klen, kstart, vlen, vstart = klen[keep], kstart[keep], vlen[keep], vstart[keep]
    n = len(offsets)
    if n == 0:
        return None
    if (arr[vstart] != 0).any():
        return None
    ids = (
        (arr[vstart + 1].astype(np.int64) << 24)
        | (arr[vstart + 2].astype(np.int64) << 16)
        | (arr[vstart + 3].astype(np.int64) << 8)
        | arr[vstart + 4].astype(np.int64)
    )
    if not (ids == ids[0]).all():
        return None
    try:
        decoder = resolver.by_id(int(ids[0]))
    except LookupPending:
        raise
    except Exception:
        return None  # the general path applies errors.tolerance to it
    if not isinstance(decoder, AvroDecoder):
        return None
    body_bytes, body_offsets = _gather(arr, vstart + 5, vlen - 5)
    try:
        varr = decode_container_block(decoder, body_bytes.tobytes(), np.diff(body_offsets))
    except Exception:
        return None  # malformed somewhere: the general path finds which records
    if varr is None:
        return None
    key_bytes, key_offsets = _gather(arr, kstart, np.maximum(klen, 0))
    key_valid = klen >= 0
    keys = pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [
            None if key_valid.all() else pa.py_buffer(np.packbits(key_valid, bitorder="little")),
            pa.py_buffer(key_offsets),
            pa.py_buffer(key_bytes),
        ],
    ).cast(pa.binary())
    ts = pa.array(timestamps, pa.int64())
    from table_topic.convert.chunk import HEADER_TYPE

    headers = pa.ListArray.from_arrays(
        pa.array(np.zeros(n + 1, np.int32)), pa.array([], HEADER_TYPE.value_type)
    )
    metadata = [
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        ts.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        keys,
        headers,
    ]
    try:
        table = assemble_columns(metadata, varr, None, cfg)
    except InvalidDataError:
        return None
    chunk = ConvertedChunk(partition, start, next_offset)
    chunk.tables.append(table)
    chunk.rows = n
    chunk.max_timestamp = int(timestamps.max())
    return chunk
