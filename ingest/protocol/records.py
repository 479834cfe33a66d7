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
    "check_client_batch",
    "set_max_timestamp",
    "write_uvarint",
    "inflate",
    "InflatedTooLargeError",
    "RecordStats",
    "read_uvarint",
    "build_batch",
    "Compression",
    "decompress",
    "read_varint",
    "write_varint",
    "build_control_batch",
    "control_marker",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
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


@dataclass(slots=True)
class BatchHeader:
    """A v2 record batch's header fields, as read (treat it as read-only).

    Not a frozen dataclass: one is read per batch on every produce, fetch
    and scan, and a frozen dataclass's ``__init__`` (``object.__setattr__``
    per field) took 2.7 us for these 14 fields here, a plain one 0.5 us."""

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
    Without ``verify_crc`` (stored data) a batch may be empty: log compaction
    keeps a producer's last batch with no records, as Kafka does.
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
            or h.records_count < 0
            or (h.records_count == 0 and verify_crc)
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


def check_client_batch(h: BatchHeader) -> None:
    """The header checks Kafka's LogValidator makes on a batch from a client
    (after :func:`split_batches`; the records are checked by
    :func:`validate_records`).

    CorruptRecordError for an unknown compression codec (the body cannot be
    read); InvalidRecordError for a batch whose offsets, count or producer
    fields make no sense. A non-idempotent batch (producer id -1) may carry
    any epoch and sequence: Sarama sends sequence 0 there, and Kafka accepts it.
    """
    if h.compression > Compression.ZSTD:
        raise CorruptRecordError(f"unknown compression codec {h.compression}")
    if h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {h.records_count} does not match the offset delta "
            f"{h.last_offset_delta} of the batch"
        )
    if h.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if h.producer_id < -1:
        raise InvalidRecordError(f"invalid producer id {h.producer_id}")
    if h.producer_id >= 0 and (h.producer_epoch < 0 or h.base_sequence < 0):
        raise InvalidRecordError(
            f"an idempotent batch needs an epoch and a sequence, got "
            f"{h.producer_epoch} and {h.base_sequence}"
        )
    if h.is_transactional and h.producer_id < 0:
        raise InvalidRecordError("a transactional batch needs a producer id")


def patch_base_offset(
    buf: memoryview | bytearray, position: int, base_offset: int, leader_epoch: int = 0
) -> None:
    """Write base offset and leader epoch into the batch at ``position`` (CRC unaffected)."""
    struct.pack_into(">q", buf, position, base_offset)
    struct.pack_into(">i", buf, position + 12, leader_epoch)


_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")


def stamp_batches(
    buf: memoryview, headers: list[BatchHeader], base_offset: int, leader_epoch: int
) -> bytes:
    """The batches of ``buf`` (indexed by ``headers``, contiguous from 0) as
    one new ``bytes``, each with its base offset (counting on from
    ``base_offset``) and ``leader_epoch`` written in: what
    :func:`patch_base_offset` does in place, done in the one copy that takes
    the batches out of a read-only buffer (neither field is under the CRC)."""
    parts: list[bytes | memoryview] = []
    offset = base_offset
    epoch = _EPOCH.pack(leader_epoch)
    for h in headers:
        pos = h.position
        parts += (
            _OFFSET.pack(offset),
            buf[pos + 8 : pos + 12],
            epoch,
            buf[pos + 16 : pos + h.size],
        )
        offset += h.count
    return b"".join(parts)


def set_log_append_time(buf: memoryview | bytearray, h: BatchHeader, now_ms: int) -> None:
    """Turn the batch into a LogAppendTime batch stamped ``now_ms``; rewrites the CRC."""
    pos = h.position
    attributes = (h.attributes & ~0x08) | 0x08
    struct.pack_into(">h", buf, pos + 21, attributes)
    struct.pack_into(">q", buf, pos + 35, now_ms)  # maxTimestamp
    crc = crc32c.crc32c(buf[pos + _CRC_START : pos + h.size])
    struct.pack_into(">I", buf, pos + 17, crc)


def set_max_timestamp(buf: memoryview | bytearray, h: BatchHeader, max_ts: int) -> None:
    """Correct a CreateTime batch's maxTimestamp to its records' (as Kafka
    does); rewrites the CRC."""
    pos = h.position
    struct.pack_into(">q", buf, pos + 35, max_ts)
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


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` (Kafka's compact lengths, tagged fields,
    snappy's preamble): (value, position after it)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")


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


class InflatedTooLargeError(KafkaError):
    """A compressed batch whose records inflate beyond what the broker accepts.

    MESSAGE_TOO_LARGE, the error Kafka gives a batch over the size it accepts
    (``RecordTooLargeException``); a Java producer splits such a batch and
    retries the halves, so a legitimate batch of very compressible records
    still gets in."""

    error_code = ErrorCode.message_too_large


@dataclass(frozen=True, slots=True)
class RecordStats:
    """What :func:`validate_records` learned walking a batch's records."""

    min_timestamp: int
    max_timestamp: int


_INFLATE_CHUNK = 256 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def inflate(
    codec: int, body: bytes | memoryview, limit: int, chunk: int = _INFLATE_CHUNK
) -> Iterator[bytes]:
    """The decompressed records section of a batch, ``chunk`` bytes at a time.

    Streaming: at most about one chunk is produced per step, and it raises
    ``InflatedTooLargeError`` as soon as more than ``limit`` bytes come out,
    so a decompression bomb costs ``limit`` bytes of work, not its size.
    Decompressor failures surface as the codec library's exceptions.
    """
    if codec == Compression.NONE:
        pieces: Iterator[bytes] = iter((bytes(body),))
    elif codec == Compression.GZIP:
        pieces = _gunzip(bytes(body), chunk)
    elif codec == Compression.SNAPPY:
        pieces = _unsnappy(bytes(body), limit)
    elif codec == Compression.LZ4:
        pieces = _unlz4(bytes(body), chunk)
    elif codec == Compression.ZSTD:
        pieces = _unzstd(bytes(body), chunk)
    else:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise InflatedTooLargeError(f"the record batch inflates to more than {limit} bytes")
        yield piece


def _gunzip(data: bytes, chunk: int) -> Iterator[bytes]:
    import zlib

    while True:
        d = zlib.decompressobj(47)  # gzip or zlib header
        while not d.eof:
            out = d.decompress(data, chunk)
            data = d.unconsumed_tail
            if out:
                yield out
            elif not data:
                raise CorruptRecordError("gzip stream truncated")
        data = d.unused_data
        if not data:
            return


def _unlz4(data: bytes, chunk: int) -> Iterator[bytes]:
    import lz4.frame

    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        while not d.eof:
            out = d.decompress(data, max_length=chunk)
            data = b""
            if out:
                yield out
            elif d.needs_input:
                raise CorruptRecordError("lz4 frame truncated")
        data = d.unused_data or b""
        if not data:
            return


def _unzstd(data: bytes, chunk: int) -> Iterator[bytes]:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while out := reader.read(chunk):
        yield out


def _unsnappy(data: bytes, limit: int) -> Iterator[bytes]:
    """Raw snappy (librdkafka) or xerial-framed blocks (the Java client); each
    block's declared size is checked before it is decompressed."""
    import cramjam

    if data[:8] == _XERIAL_MAGIC:
        blocks: list[tuple[int, int]] = []
        pos = 16
        while pos < len(data):
            if pos + 4 > len(data):
                raise CorruptRecordError("snappy block length truncated")
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if n < 0 or pos + n > len(data):
                raise CorruptRecordError("snappy block exceeds the batch")
            blocks.append((pos, pos + n))
            pos += n
    else:
        blocks = [(0, len(data))]
    total = 0
    for lo, hi in blocks:
        block = data[lo:hi]
        size, _ = read_uvarint(block, 0)
        total += size
        if total > limit:
            raise InflatedTooLargeError(f"the record batch inflates to more than {limit} bytes")
        yield bytes(cramjam.snappy.decompress_raw(block))


class _Source:
    """Bytes pulled from an iterator of chunks; holds the current chunk only
    (plus the few bytes of a field split across two chunks)."""

    __slots__ = ("data", "pos", "base", "_chunks")

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.data = b""
        self.pos = 0
        self.base = 0  # offset of data[0] in the whole stream

    def tell(self) -> int:
        return self.base + self.pos

    def fill(self, need: int) -> bool:
        """Make ``need`` bytes readable at ``pos`` (all that is left near the
        end); False when nothing is left."""
        while len(self.data) - self.pos < need:
            nxt = next(self._chunks, None)
            if nxt is None:
                return len(self.data) > self.pos
            self.base += self.pos
            self.data = self.data[self.pos :] + nxt
            self.pos = 0
        return True

    def varint(self) -> int:
        self.fill(10)
        value, self.pos = read_varint(self.data, self.pos)
        return value

    def skip(self, n: int) -> None:
        while n > len(self.data) - self.pos:
            n -= len(self.data) - self.pos
            self.base += len(self.data)
            self.data = next(self._chunks, b"")
            self.pos = 0
            if not self.data:
                raise CorruptRecordError("record truncated")
        self.pos += n


def validate_records(buf: memoryview | bytes, h: BatchHeader, limit: int = 1 << 62) -> RecordStats:
    """Check a batch's records as Kafka does before appending (the CRC only
    proves the bytes are the producer's), decompressing in bounded chunks.

    Every record's length, timestamp delta and offset delta are read: the
    records must chain to the end of the batch, number exactly
    ``recordsCount``, and have offset deltas 0, 1, 2...; the first and the
    last record are parsed field by field (middle records with a malformed
    key or header are rejected by readers, not silently mis-read). Memory is
    one decompressed chunk whatever the record sizes; ``limit`` bounds the
    decompressed bytes (``InflatedTooLargeError``).

    Raises CorruptRecordError for bytes that are not records,
    InvalidRecordError when the records disagree with the header.
    """
    body = buf[h.position + BATCH_HEADER_SIZE : h.position + h.size]
    src = _Source(inflate(h.compression, body, limit))
    count = h.records_count
    base_ts = h.base_timestamp
    lo = hi = base_ts  # reset to the first record's timestamp
    try:
        last = count - 1
        for i in range(count):
            if len(src.data) - src.pos < 32 and not src.fill(32):
                raise InvalidRecordError(f"the batch holds {i} records; its header says {count}")
            data = src.data
            pos = src.pos
            # three varints, with their one- and two-byte forms inlined
            b0 = data[pos]
            if b0 < 0x80:
                length = (b0 >> 1) ^ -(b0 & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b0 & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = src.base + pos + length
            if length <= 0:
                raise CorruptRecordError("invalid record length")
            pos += 1  # attributes
            b0 = data[pos]
            if b0 < 0x80:
                ts_delta = (b0 >> 1) ^ -(b0 & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b0 & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                ts_delta, pos = read_varint(data, pos)
            b0 = data[pos]
            if b0 < 0x80:
                off_delta = (b0 >> 1) ^ -(b0 & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b0 & 0x7F) | (data[pos + 1] << 7)
                off_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                off_delta, pos = read_varint(data, pos)
            if off_delta != i:
                raise InvalidRecordError(f"record {i} of the batch has offset delta {off_delta}")
            ts = base_ts + ts_delta
            if ts > hi:
                hi = ts
            elif ts < lo:
                lo = ts
            if i == 0:
                lo = hi = ts
            src.pos = pos
            if i == 0 or i == last:
                _check_record_rest(src, end)
            elif end <= src.base + len(data):
                src.pos = end - src.base
            elif end < src.tell():
                raise CorruptRecordError("record length mismatch")
            else:
                src.skip(end - src.tell())
        if src.fill(1):
            raise InvalidRecordError(f"the batch holds more than its {count} records")
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc
    except KafkaError:
        raise
    except Exception as exc:  # the codec libraries' own errors
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
    return RecordStats(lo, hi)


def _check_record_rest(src: _Source, end: int) -> None:
    """Parse a record's key, value and headers; it must end at ``end``."""
    for _field in ("key", "value"):
        n = src.varint()
        if n < -1 or src.tell() + n > end:
            raise CorruptRecordError(f"invalid record {_field} length")
        if n > 0:
            src.skip(n)
    headers = src.varint()
    if headers < 0:
        raise CorruptRecordError("negative header count")
    for _ in range(headers):
        n = src.varint()
        if n < 0 or src.tell() + n > end:
            raise CorruptRecordError("invalid record header key length")
        src.skip(n)
        n = src.varint()
        if n < -1 or src.tell() + n > end:
            raise CorruptRecordError("invalid record header value length")
        if n > 0:
            src.skip(n)
    if src.tell() != end:
        raise CorruptRecordError("record length mismatch")


def write_uvarint(v: int) -> bytes:
    """``v`` (not negative) as an unsigned varint (compact lengths, tagged fields)."""
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_varint(n: int) -> bytes:
    """``n`` as a zig-zag varint (Kafka records and Avro longs use the same encoding)."""
    return write_uvarint((n << 1) ^ (n >> 63))


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


# --- control batches (transaction markers) ------------------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type (0 abort, 1 commit)
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker as Kafka writes one: a transactional control batch
    of the producer (base sequence -1) holding one record whose key is the
    control type and whose value is the end-transaction marker."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value, [], timestamp_ms)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        attributes=_TRANSACTIONAL | _CONTROL,
    )


def control_marker(buf: memoryview | bytes, h: BatchHeader) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch's first record;
    the epoch is -1 when the record has no marker value."""
    for r in decode_records(buf, h):
        if r.key is None or len(r.key) < _CONTROL_KEY.size:
            raise CorruptRecordError("a control record without a control key")
        _version, kind = _CONTROL_KEY.unpack_from(r.key)
        epoch = -1
        if r.value is not None and len(r.value) >= _MARKER_VALUE.size:
            epoch = _MARKER_VALUE.unpack_from(r.value)[1]
        return kind, epoch
    raise CorruptRecordError("a control batch without records")
