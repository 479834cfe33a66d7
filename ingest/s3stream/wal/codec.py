"""The WAL record codec shared by the file and object-store WALs.

Record layout (little endian), followed by ``length`` payload bytes::

    u32 length | u32 crc32c | i64 stream_id | i64 base_offset | i32 count

The CRC32C covers ``length, stream_id, base_offset, count`` and the payload.
"""

from __future__ import annotations

import struct

import crc32c

from ingest.s3stream.wal.api import WalRecord

__all__ = ["HEADER", "RECORD_HEADER_SIZE", "encode_header", "scan_records"]

HEADER = struct.Struct("<IIqqi")
_CRC_FIELDS = struct.Struct("<Iqqi")
RECORD_HEADER_SIZE = HEADER.size


def encode_header(
    stream_id: int, base_offset: int, count: int, payload: bytes | memoryview
) -> bytes:
    """The header of one record (its CRC covers the payload)."""
    length = len(payload)
    crc = crc32c.crc32c(
        payload, crc32c.crc32c(_CRC_FIELDS.pack(length, stream_id, base_offset, count))
    )
    return HEADER.pack(length, crc, stream_id, base_offset, count)


def scan_records(data: bytes | memoryview, start: int) -> tuple[list[WalRecord], int, bool]:
    """Parse records laid out back to back from logical position ``start``.

    Returns (intact records, valid length, torn?): parsing stops at the first
    short or corrupt record. Payloads are zero-copy views into ``data``.
    """
    view = memoryview(data)
    records: list[WalRecord] = []
    off = 0
    size = len(view)
    while off < size:
        if size - off < HEADER.size:
            return records, off, True
        length, crc, sid, base, count = HEADER.unpack_from(view, off)
        end = off + HEADER.size + length
        if end > size:
            return records, off, True
        payload = view[off + HEADER.size : end]
        want = crc32c.crc32c(payload, crc32c.crc32c(_CRC_FIELDS.pack(length, sid, base, count)))
        if want != crc:
            return records, off, True
        records.append(WalRecord(sid, base, count, payload, start + off, start + end))
        off = end
    return records, off, False
