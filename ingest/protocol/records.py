"""Kafka record batches (message format v2), without copying the payload.

A produce request carries one or more record batches per partition. The broker
keeps each batch as the producer sent it (whatever its compression): it checks
the CRC32C, reads the header fields it needs, and patches the base offset in
place (the CRC does not cover the first 21 bytes, so no re-encoding is needed).

Record-level decoding (with decompression) is here too, for ListOffsets by
timestamp and for readers such as the table topic workers.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchHeader",
    "CorruptRecordError",
    "InvalidRecordError",
    "Record",
    "split_batches",
    "patch_base_offset",
    "set_log_append_time",
    "decode_records",
    "validate_records",
    "build_batch",
    "Compression",
    "decompress",
    "read_varint",
    "write_varint",
]

# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
# maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
# recordsCount int32
_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _HEADER.size  # 61
_CRC_START = 21  # attributes onward are covered by the CRC
_LOG_OVERHEAD = 12  # baseOffset + batchLength


class CorruptRecordError(KafkaError):
    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    error_code = ErrorCode.invalid_record


class Compression:
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int  # where the batch starts in the buffer it was read from

    @property
    def size(self) -> int:
        return self.batch_length + _LOG_OVERHEAD

    @property
    def count(self) -> int:
        return self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & 0x08)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_header(buf: memoryview | bytes, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch header truncated")
    return BatchHeader(*_HEADER.unpack_from(buf, pos), position=pos)  # type: ignore[misc]


def split_batches(buf: memoryview, *, verify_crc: bool = True) -> list[BatchHeader]:
    """Validate and index every batch in a produce payload.

    Raises CorruptRecordError for truncation or CRC mismatch and
    InvalidRecordError for structurally invalid batches (wrong magic, counts).
    """
    headers: list[BatchHeader] = []
    pos = 0
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("empty record set")
    while pos < end:
        h = read_header(buf, pos)
        if h.magic != 2:
            raise InvalidRecordError(
                f"unsupported message format magic {h.magic}; only v2 is accepted"
            )
        if h.batch_length < BATCH_HEADER_SIZE - _LOG_OVERHEAD or pos + h.size > end:
            raise CorruptRecordError("record batch length exceeds the payload")
        if (
            h.last_offset_delta < 0
            or (h.records_count >= 0 and h.records_count > h.last_offset_delta + 1)
            or h.records_count <= 0
        ):
            raise InvalidRecordError("record batch has an invalid record count")
        if verify_crc:
            actual = crc32c.crc32c(buf[pos + _CRC_START : pos + h.size])
            if actual != h.crc:
                raise CorruptRecordError(
                    f"record batch CRC mismatch (stored {h.crc:#x}, computed {actual:#x})"
                )
        headers.append(h)
        pos += h.size
    return headers


def patch_base_offset(
    buf: memoryview | bytearray, position: int, base_offset: int, leader_epoch: int = 0
) -> None:
    """Write base offset and leader epoch into the batch at ``position`` (CRC unaffected)."""
    struct.pack_into(">q", buf, position, base_offset)
    struct.pack_into(">i", buf, position + 12, leader_epoch)


def set_log_append_time(buf: memoryview | bytearray, h: BatchHeader, now_ms: int) -> None:
    """Turn the batch into a LogAppendTime batch stamped ``now_ms``; rewrites the CRC."""
    pos = h.position
    attributes = (h.attributes & ~0x08) | 0x08
    struct.pack_into(">h", buf, pos + 21, attributes)
    struct.pack_into(">q", buf, pos + 35, now_ms)  # maxTimestamp
    crc = crc32c.crc32c(buf[pos + _CRC_START : pos + h.size])
    struct.pack_into(">I", buf, pos + 17, crc)


# --- record level ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress a batch's records section with the batch's codec."""
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return gzip.decompress(data)
    if codec == Compression.SNAPPY:
        import cramjam

        # Kafka's Java client frames snappy in xerial's format; librdkafka
        # writes raw snappy. Detect the xerial magic.
        if data[:8] == b"\x82SNAPPY\x00":
            out = bytearray()
            pos = 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + n]))
                pos += n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == Compression.LZ4:
        import lz4.frame

        return lz4.frame.decompress(data)  # type: ignore[no-any-return]
    if codec == Compression.ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise InvalidRecordError(f"unknown compression codec {codec}")


def decode_records(buf: memoryview | bytes, h: BatchHeader) -> Iterator[Record]:
    """Decode the records of one batch (decompressing as needed)."""
    start = h.position + BATCH_HEADER_SIZE
    body = bytes(buf[start : h.position + h.size])
    try:
        data = decompress(h.compression, body)
    except KafkaError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
    pos = 0
    try:
        for _ in range(h.records_count):
            length, pos = read_varint(data, pos)
            end = pos + length
            pos += 1  # attributes
            ts_delta, pos = read_varint(data, pos)
            off_delta, pos = read_varint(data, pos)
            klen, pos = read_varint(data, pos)
            key = None
            if klen >= 0:
                key = data[pos : pos + klen]
                pos += klen
            vlen, pos = read_varint(data, pos)
            value = None
            if vlen >= 0:
                value = data[pos : pos + vlen]
                pos += vlen
            nh, pos = read_varint(data, pos)
            headers = []
            for _ in range(nh):
                hk, pos = read_varint(data, pos)
                hkey = data[pos : pos + hk].decode("utf-8", "replace")
                pos += hk
                hv, pos = read_varint(data, pos)
                hval = None
                if hv >= 0:
                    hval = data[pos : pos + hv]
                    pos += hv
                headers.append((hkey, hval))
            if pos != end:
                raise CorruptRecordError("record length mismatch")
            ts = h.max_timestamp if h.log_append_time else h.base_timestamp + ts_delta
            yield Record(h.base_offset + off_delta, ts, key, value, tuple(headers))
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc


def validate_records(buf: memoryview | bytes, h: BatchHeader) -> None:
    """Check that a batch's records decode (decompressing as needed), as Kafka
    does before appending: the CRC only proves the bytes are the producer's.

    The hot path walks the chain of record length prefixes (every record must
    start where the previous one ended, the count must match and the last one
    must end at the end of the batch) and fully parses the first and the last
    record. That catches truncated, padded and garbled batches at a fraction
    of the cost of parsing every field of every record in Python; a batch
    that passes it and still has a malformed field inside a middle record is
    rejected by readers, not silently mis-read.

    Raises CorruptRecordError when they do not.
    """
    start = h.position + BATCH_HEADER_SIZE
    try:
        data = decompress(h.compression, bytes(buf[start : h.position + h.size]))
    except KafkaError as exc:
        raise CorruptRecordError(str(exc)) from exc
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
    size = len(data)
    pos = 0
    first_end = last_start = -1
    count = h.records_count
    try:
        for i in range(count):
            b0 = data[pos]
            if b0 < 0x80:  # one-byte varint: records under 64 bytes
                length = (b0 >> 1) ^ -(b0 & 1)
                body = pos + 1
            else:
                length, body = read_varint(data, pos)
            end = body + length
            if length <= 0 or end > size:
                raise CorruptRecordError("record length exceeds the batch")
            if i == 0:
                first_end = end
                _check_record(data, body, end)
            last_start = body
            pos = end
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes after the last record")
    if count > 1 and last_start >= first_end:
        _check_record(data, last_start, pos)


def _check_record(data: bytes, pos: int, end: int) -> None:
    """Parse one record's fields between ``pos`` and ``end``."""
    try:
        pos += 1  # attributes
        _ts, pos = read_varint(data, pos)
        _delta, pos = read_varint(data, pos)
        for _field in ("key", "value"):
            n, pos = read_varint(data, pos)
            if n < -1:
                raise CorruptRecordError("negative key or value length")
            pos += max(n, 0)
        headers, pos = read_varint(data, pos)
        if headers < 0:
            raise CorruptRecordError("negative header count")
        for _ in range(headers):
            n, pos = read_varint(data, pos)
            if n < 0:
                raise CorruptRecordError("null header key")
            pos += n
            n, pos = read_varint(data, pos)
            if n < -1:
                raise CorruptRecordError("negative header value length")
            pos += max(n, 0)
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc
    if pos != end:
        raise CorruptRecordError("record length mismatch")


def write_varint(n: int) -> bytes:
    """``n`` as a zig-zag varint (Kafka records and Avro longs use the same encoding)."""
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def build_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """Encode an uncompressed v2 batch of (key, value, headers, timestamp_ms)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0][3]
    max_ts = max(r[3] for r in records)
    body = bytearray()
    for i, (key, value, headers, ts) in enumerate(records):
        rec = bytearray(b"\0")
        rec += write_varint(ts - base_ts) + write_varint(i)
        rec += write_varint(-1) if key is None else write_varint(len(key)) + key
        rec += write_varint(-1) if value is None else write_varint(len(value)) + value
        rec += write_varint(len(headers))
        for hk, hv in headers:
            kb = hk.encode()
            rec += write_varint(len(kb)) + kb
            rec += write_varint(-1) if hv is None else write_varint(len(hv)) + hv
        body += write_varint(len(rec)) + rec
    batch_length = BATCH_HEADER_SIZE - _LOG_OVERHEAD + len(body)
    out = bytearray(
        _HEADER.pack(
            base_offset,
            batch_length,
            0,
            2,
            0,
            attributes,
            len(records) - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    out += body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[_CRC_START:])))
    return bytes(out)
