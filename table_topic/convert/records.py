"""Kafka v2 record batches as columns (offsets, timestamps, keys, values, headers).

``ingest.protocol.records.decode_records`` builds one object per record; the
table path only needs columns, so this parser fills lists directly, with the
common one-byte varints inlined. Compressed batches are decompressed with the
broker's own codec table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    Record,
    decompress,  # the broker's codec table
    read_varint,
)

__all__ = ["RecordColumns", "read_columns"]


@dataclass(slots=True)
class RecordColumns:
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[tuple[str, bytes | None], ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> Record:
        return Record(
            self.offsets[i], self.timestamps[i], self.keys[i], self.values[i], self.headers[i]
        )

    def head(self, n: int) -> RecordColumns:
        return RecordColumns(
            self.offsets[:n], self.timestamps[:n], self.keys[:n], self.values[:n], self.headers[:n]
        )

    @classmethod
    def from_records(cls, records: Sequence[Record]) -> RecordColumns:
        return cls(
            [r.offset for r in records],
            [r.timestamp for r in records],
            [r.key for r in records],
            [r.value for r in records],
            [r.headers for r in records],
        )


def _parse_batch(buf: bytes | memoryview, h: BatchHeader, start: int, out: RecordColumns) -> None:
    body = bytes(buf[h.position + BATCH_HEADER_SIZE : h.position + h.size])
    try:
        data = decompress(h.compression, body)
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    lat = h.log_append_time
    max_ts = h.max_timestamp
    offsets = out.offsets
    timestamps = out.timestamps
    keys = out.keys
    values = out.values
    headers_out = out.headers
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    pos = 0
    try:
        for _ in range(h.records_count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                ts_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                off_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                off_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                klen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                key: bytes | None = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                value: bytes | None = data[pos : pos + vlen]
                pos += vlen
            else:
                value = None
            b = data[pos]
            if b == 0:
                pos += 1
                hdrs = no_headers
            else:
                nh, pos = read_varint(data, pos)
                items = []
                for _h in range(nh):
                    hk, pos = read_varint(data, pos)
                    hkey = data[pos : pos + hk].decode("utf-8", "replace")
                    pos += hk
                    hv, pos = read_varint(data, pos)
                    hval = None
                    if hv >= 0:
                        hval = data[pos : pos + hv]
                        pos += hv
                    items.append((hkey, hval))
                hdrs = tuple(items)
            if pos != end:
                raise CorruptRecordError("record length mismatch")
            offset = base_offset + off_delta
            if offset < start:
                continue
            offsets.append(offset)
            timestamps.append(max_ts if lat else base_ts + ts_delta)
            keys.append(key)
            values.append(value)
            headers_out.append(hdrs)
    except IndexError as exc:
        raise CorruptRecordError("record truncated") from exc


def read_columns(
    batches: Sequence[tuple[bytes | memoryview, BatchHeader]], start: int
) -> RecordColumns:
    """The records at offsets >= ``start`` of ``batches`` (control batches skipped)."""
    out = RecordColumns()
    for buf, h in batches:
        if h.is_control:
            continue
        _parse_batch(buf, h, start, out)
    return out
