"""Record-level rewriting of Kafka record batches (v2) for the log cleaner.

A cleaned batch keeps its header (base offset, last offset delta, base and
max timestamp, producer id, epoch and base sequence, partition leader
epoch): offsets, timestamps and the producer's sequence range stay what
they were; only the records the cleaner drops disappear, and the record
count and CRC are recomputed. A batch left without records is an *empty
batch* (record count 0), as Kafka's cleaner writes one to keep a producer's
last sequence. A batch that loses records is compressed again with its own
codec (gzip, lz4, zstd, and snappy in the Java client's xerial framing,
which Java, librdkafka, kafka-python and aiokafka all read); a batch that
loses nothing is kept byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c

from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Compression,
    CorruptRecordError,
    decompress,
    read_varint,
)

__all__ = ["RawRecord", "iter_raw_records", "rebuild_batch"]

_HEADER = struct.Struct(">qiibIhiqqqhii")  # Kafka's record batch v2 header
_CRC_START = 21  # the CRC covers the attributes onward
_LOG_OVERHEAD = 12  # base offset + batch length
_COMPRESSION_MASK = 0x07


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of a batch: where it is in the decompressed records
    section (length prefix included) and what the cleaner decides on."""

    offset_delta: int
    key: bytes | None
    tombstone: bool  # null value
    start: int
    end: int


def iter_raw_records(buf: memoryview | bytes, h: BatchHeader) -> tuple[bytes, Iterator[RawRecord]]:
    """The decompressed records section of ``h`` and its records."""
    body = bytes(buf[h.position + BATCH_HEADER_SIZE : h.position + h.size])
    try:
        data = decompress(h.compression, body)
    except Exception as exc:  # noqa: BLE001 - the codecs' own errors
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc

    def records() -> Iterator[RawRecord]:
        pos = 0
        try:
            for _ in range(h.records_count):
                start = pos
                length, pos = read_varint(data, pos)
                end = pos + length
                pos += 1  # attributes
                _ts, pos = read_varint(data, pos)
                off_delta, pos = read_varint(data, pos)
                klen, pos = read_varint(data, pos)
                key = None
                if klen >= 0:
                    key = data[pos : pos + klen]
                    pos += klen
                vlen, pos = read_varint(data, pos)
                yield RawRecord(off_delta, key, vlen < 0, start, end)
                pos = end
        except IndexError as exc:
            raise CorruptRecordError("record truncated") from exc

    return data, records()


def rebuild_batch(
    buf: memoryview | bytes,
    h: BatchHeader,
    keep: Callable[[RawRecord], bool],
) -> tuple[bytes, int, int]:
    """The batch with only the records ``keep`` accepts: (bytes, records
    kept, records dropped). Unchanged batches come back as they were."""
    data, records = iter_raw_records(buf, h)
    kept: list[tuple[int, int]] = []
    dropped = 0
    for r in records:
        if keep(r):
            kept.append((r.start, r.end))
        else:
            dropped += 1
    if not dropped:
        return bytes(buf[h.position : h.position + h.size]), len(kept), 0
    body = b"".join(data[s:e] for s, e in kept)
    codec = h.compression
    if kept and codec in (
        Compression.GZIP,
        Compression.SNAPPY,
        Compression.LZ4,
        Compression.ZSTD,
    ):
        body = _compress(codec, body)
    else:
        codec = Compression.NONE
    header = bytearray(
        _HEADER.pack(
            h.base_offset,
            BATCH_HEADER_SIZE - _LOG_OVERHEAD + len(body),
            h.partition_leader_epoch,
            2,
            0,
            (h.attributes & ~_COMPRESSION_MASK) | codec,
            h.last_offset_delta,
            h.base_timestamp,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(kept),
        )
    )
    out = header + body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[_CRC_START:])))
    return bytes(out), len(kept), dropped


# xerial snappy-java's stream framing: magic, version 1, compatible version
# 1, then blocks of at most 32 KiB, each a big-endian length and raw snappy
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.SNAPPY:
        import cramjam

        parts = [_XERIAL_HEADER]
        for at in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[at : at + _XERIAL_BLOCK]))
            parts += (struct.pack(">i", len(block)), block)
        return b"".join(parts)
    if codec == Compression.GZIP:
        import gzip

        return gzip.compress(data, compresslevel=6)
    if codec == Compression.LZ4:
        import lz4.frame

        return bytes(lz4.frame.compress(data))
    import zstandard

    return bytes(zstandard.ZstdCompressor().compress(data))
