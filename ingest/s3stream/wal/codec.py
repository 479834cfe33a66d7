"""The WAL record codec shared by the file and object-store WALs.

Record layout (little endian), followed by ``length`` payload bytes::

    u32 length | u32 crc32c | i64 stream_id | i64 base_offset | i32 count

The CRC32C covers ``length, stream_id, base_offset, count``, the record's
logical position in the log (not stored: the reader knows where it is
reading) and the payload. A record read back at any other position fails its
check, so bytes left over from an earlier use of a recycled file segment
(or an object read under the wrong position) are never taken for records,
even where they line up with record boundaries.
"""

from __future__ import annotations

import struct

import crc32c

from ingest.s3stream.wal.api import WalRecord

__all__ = ["HEADER", "RECORD_HEADER_SIZE", "encode_header", "scan_records"]

HEADER = struct.Struct("<IIqqi")
_CRC_FIELDS = struct.Struct("<Iqqiq")
RECORD_HEADER_SIZE = HEADER.size


def encode_header(
    stream_id: int, base_offset: int, count: int, payload: bytes | memoryview, position: int
) -> bytes:
    """The header of the record at logical ``position`` (its CRC covers the
    payload and the position)."""
    length = len(payload)
    crc = crc32c.crc32c(
        payload, crc32c.crc32c(_CRC_FIELDS.pack(length, stream_id, base_offset, count, position))
    )
    return HEADER.pack(length, crc, stream_id, base_offset, count)


def scan_records(
    data: bytes | memoryview, start: int, *, written_at: int | None = None
) -> tuple[list[WalRecord], int, bool]:
    """Parse records laid out back to back from logical position ``start``.

    ``written_at`` is the position the first record was written at, where
    that differs from the position the records get now (a recovery that
    numbers another log's records anew); the CRCs are checked against it.

    Returns (intact records, valid length, torn?): parsing stops at the first
    short or corrupt record, or at one written for another position. Payloads
    are zero-copy views into ``data``.
    """
    crc_start = start if written_at is None else written_at
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
        fields = _CRC_FIELDS.pack(length, sid, base, count, crc_start + off)
        want = crc32c.crc32c(payload, crc32c.crc32c(fields))
        if want != crc:
            return records, off, True
        records.append(WalRecord(sid, base, count, payload, start + off, start + end))
        off = end
    return records, off, False
