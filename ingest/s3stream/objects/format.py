"""The stream set object format.

An object holds ranges of one or more streams and can be read and verified
without the metadata store::

    data section   for each stream range, its batches back to back, each
                   ``i64 base_offset | i32 count | u32 length | u32 crc32c``
                   followed by ``length`` payload bytes
    index block    ``u32 entry_count`` then per range
                   ``i64 stream_id | i64 start_offset | i64 end_offset |
                   u64 position | u64 length``
    footer         ``u64 index_position | u32 index_length | u16 format_version |
                   u16 reserved | 8 bytes magic | u32 crc32c``

All integers are little endian; positions are from the start of the object.
A batch's CRC32C covers its ``base_offset, count, length`` and payload; the
footer's CRC32C covers the index block and the footer bytes before it. A
range's ``position``/``length`` cover its batches (headers included), so one
ranged GET fetches a range.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
import numpy as np

from ingest.errors import CorruptDataError
from ingest.s3stream.api import StreamBatch

__all__ = [
    "FORMAT_VERSION",
    "FOOTER_SIZE",
    "MAGIC",
    "IndexEntry",
    "StreamRange",
    "decode_index",
    "encode",
    "encode_object",
    "iter_batches",
]

MAGIC = b"TLKSSO\x00\x01"
FORMAT_VERSION = 1
_BATCH = struct.Struct("<qiII")
_BATCH_CRC_FIELDS = struct.Struct("<qiI")
_INDEX_COUNT = struct.Struct("<I")
_INDEX_ENTRY = struct.Struct("<qqqQQ")
_FOOTER = struct.Struct("<QIHH8sI")
FOOTER_SIZE = _FOOTER.size
_NUMPY_COPY_MIN = 4096  # bytes from which concat copies through numpy
BATCH_HEADER_SIZE = _BATCH.size


def _native() -> Any:
    try:
        from ingest.s3stream.objects import _objencode
    except ImportError:  # not built: the Python encoder
        return None
    return _objencode


_NATIVE = _native()


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stream range of an object: offsets [start, end) at [position, position+length)."""

    stream_id: int
    start_offset: int
    end_offset: int
    position: int
    length: int


def encode(
    ranges: Sequence[Sequence[StreamBatch]],
) -> tuple[list[bytes | memoryview], list[IndexEntry]]:
    """Lay out an object; returns (buffers to concatenate, index entries).

    Each element of ``ranges`` is one stream range: batches of a single
    stream, contiguous and in offset order. Payloads are not copied; join the
    buffers (``b"".join``) or write them with a vectored write.
    """
    buffers: list[bytes | memoryview] = []
    index: list[IndexEntry] = []
    position = 0
    for batches in ranges:
        if not batches:
            continue
        sid = batches[0].stream_id
        start = position
        expected = batches[0].base_offset
        for b in batches:
            if b.stream_id != sid or b.base_offset != expected:
                raise ValueError("a range must hold contiguous batches of one stream")
            expected = b.end_offset
            length = len(b.payload)
            crc = _batch_crc(b.base_offset, b.count, length, b.payload)
            buffers.append(_BATCH.pack(b.base_offset, b.count, length, crc))
            buffers.append(b.payload)
            position += _BATCH.size + length
        index.append(IndexEntry(sid, batches[0].base_offset, expected, start, position - start))
    buffers.append(_tail(index, position))
    return buffers, index


def _tail_size(ranges: int) -> int:
    return _INDEX_COUNT.size + ranges * _INDEX_ENTRY.size + FOOTER_SIZE


def _tail(index: Sequence[IndexEntry], position: int) -> bytes:
    """The index block and the footer of an object whose data section ends at ``position``."""
    index_bytes = _INDEX_COUNT.pack(len(index)) + b"".join(
        _INDEX_ENTRY.pack(e.stream_id, e.start_offset, e.end_offset, e.position, e.length)
        for e in index
    )
    footer = _FOOTER.pack(position, len(index_bytes), FORMAT_VERSION, 0, MAGIC, 0)
    crc = crc32c.crc32c(footer[:-4], crc32c.crc32c(index_bytes))
    return index_bytes + footer[:-4] + struct.pack("<I", crc)


def encode_object(ranges: Sequence[Sequence[StreamBatch]]) -> tuple[bytearray, list[IndexEntry]]:
    """:func:`encode` and :func:`concat` in one: the whole object body in one
    buffer, and its index. The data section is laid out by the C encoder
    (``_objencode.c`` says why) where it is built, else in Python."""
    if _NATIVE is None:
        buffers, index = encode(ranges)
        return concat(buffers), index
    tail = _tail_size(sum(1 for r in ranges if r))
    body, entries = _NATIVE.data_section(ranges, tail)
    index = [IndexEntry(*e) for e in entries]
    position = len(body) - tail
    body[position:] = _tail(index, position)
    return body, index


def _batch_crc(base: int, count: int, length: int, payload: bytes | memoryview) -> int:
    return int(crc32c.crc32c(payload, crc32c.crc32c(_BATCH_CRC_FIELDS.pack(base, count, length))))


def decode_footer(footer: bytes | memoryview) -> tuple[int, int]:
    """Validate the last ``FOOTER_SIZE`` bytes; returns (index_position, index_length)."""
    if len(footer) < FOOTER_SIZE:
        raise CorruptDataError("object too short for a footer")
    index_pos, index_len, version, _reserved, magic, _crc = _FOOTER.unpack_from(
        footer, len(footer) - FOOTER_SIZE
    )
    if magic != MAGIC:
        raise CorruptDataError("bad stream set object magic")
    if version != FORMAT_VERSION:
        raise CorruptDataError(f"unsupported stream set object version {version}")
    return int(index_pos), int(index_len)


def decode_index(tail: bytes | memoryview, object_size: int | None = None) -> list[IndexEntry]:
    """Decode and verify the index from the tail of an object.

    ``tail`` is the last bytes of the object: at least the index block and the
    footer (the whole object is fine). ``object_size``, when known, lets the
    index position be checked too. Raises ``CorruptDataError`` when the
    footer, the index checksum or the index structure is wrong, and
    ``ValueError`` if ``tail`` is too short to hold the index (read more).
    """
    view = memoryview(tail)
    index_pos, index_len = decode_footer(view)
    footer = view[len(view) - FOOTER_SIZE :]
    index_crc = _FOOTER.unpack_from(footer)[5]
    if object_size is not None and index_pos + index_len + FOOTER_SIZE != object_size:
        raise CorruptDataError("stream set object footer does not match the object size")
    if index_len + FOOTER_SIZE > len(view):
        raise ValueError(f"need the last {index_len + FOOTER_SIZE} bytes of the object")
    start = len(view) - FOOTER_SIZE - index_len
    index = view[start : start + index_len]
    if crc32c.crc32c(footer[:-4], crc32c.crc32c(index)) != index_crc:
        raise CorruptDataError("stream set object index checksum mismatch")
    if index_len < _INDEX_COUNT.size:
        raise CorruptDataError("stream set object index too short")
    (count,) = _INDEX_COUNT.unpack_from(index, 0)
    if _INDEX_COUNT.size + count * _INDEX_ENTRY.size != index_len:
        raise CorruptDataError("stream set object index length mismatch")
    out: list[IndexEntry] = []
    off = _INDEX_COUNT.size
    for _ in range(count):
        sid, s, e, pos, length = _INDEX_ENTRY.unpack_from(index, off)
        off += _INDEX_ENTRY.size
        if e < s or pos + length > index_pos:
            raise CorruptDataError("stream set object index entry out of bounds")
        out.append(IndexEntry(sid, s, e, pos, length))
    return out


def index_tail_size(tail: bytes | memoryview) -> int:
    """How many bytes from the end hold the index and footer (needs the footer)."""
    _, index_len = decode_footer(tail)
    return index_len + FOOTER_SIZE


def iter_batches(
    stream_id: int, data: bytes | memoryview, *, verify: bool = True
) -> Iterator[StreamBatch]:
    """Iterate the batches of one stream range read at the range's position.

    Payloads are zero-copy memoryviews into ``data``. With ``verify`` each
    batch's CRC32C is checked (``CorruptDataError`` on mismatch).
    """
    view = memoryview(data)
    off = 0
    size = len(view)
    while off < size:
        if size - off < _BATCH.size:
            raise CorruptDataError("truncated batch header in stream set object")
        base, count, length, crc = _BATCH.unpack_from(view, off)
        start = off + _BATCH.size
        end = start + length
        if end > size or count < 0:
            raise CorruptDataError("batch overruns its stream range")
        payload = view[start:end]
        if verify and _batch_crc(base, count, length, payload) != crc:
            raise CorruptDataError(
                f"batch checksum mismatch in stream {stream_id} at offset {base}"
            )
        yield StreamBatch(stream_id, base, count, payload)
        off = end


def concat(buffers: Iterable[bytes | memoryview]) -> bytearray:
    """Join encoded buffers into one object body without holding the GIL for
    the copying.

    ``b"".join`` copies the whole body in one call that holds the GIL (5-10 ms
    for 32 MiB). Copying buffer by buffer with memoryview assignments holds it
    too, from one forced switch to the next: the event loop then waits about
    a switch interval (1 ms) every time it needs the GIL while an upload or a
    compaction builds its object. numpy copies release the GIL, so large
    buffers go through numpy (measured: the loop's wake-up delay while 64 MiB
    are joined drops from 1.2 ms to 0.1 ms at the median); small ones, where
    numpy's call overhead dominates, are assigned directly.
    """
    parts = list(buffers)
    out = bytearray(sum(len(b) for b in parts))
    view = memoryview(out)
    array = np.frombuffer(out, dtype=np.uint8)
    pos = 0
    for b in parts:
        n = len(b)
        if n >= _NUMPY_COPY_MIN:
            array[pos : pos + n] = np.frombuffer(b, dtype=np.uint8)
        else:
            view[pos : pos + n] = b
        pos += n
    return out


class StreamRange:
    """One stream range read from an object: parsed (and verified) once, then
    served by offset with a binary search. ``len()`` is the bytes it keeps
    alive (the range, or the whole buffer it was cut from)."""

    __slots__ = (
        "stream_id",
        "_view",
        "_size",
        "_footprint",
        "_bases",
        "_counts",
        "_starts",
        "_ends",
    )

    def __init__(self, stream_id: int, data: bytes | memoryview, *, verify: bool = True) -> None:
        # One pass, no per-batch objects: this runs for every range a
        # catch-up read loads, so its per-batch cost is read throughput.
        view = memoryview(data)
        size = len(view)
        bases: list[int] = []
        counts: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        unpack, crc, header = _BATCH.unpack_from, crc32c.crc32c, _BATCH.size
        fields = _BATCH_CRC_FIELDS.size  # the header bytes a batch CRC covers
        off = 0
        while off < size:
            if size - off < header:
                raise CorruptDataError("truncated batch header in stream set object")
            base, count, length, want = unpack(view, off)
            start = off + header
            end = start + length
            if end > size or count < 0:
                raise CorruptDataError("batch overruns its stream range")
            if verify and crc(view[start:end], crc(view[off : off + fields])) != want:
                raise CorruptDataError(
                    f"batch checksum mismatch in stream {stream_id} at offset {base}"
                )
            bases.append(base)
            counts.append(count)
            starts.append(start)
            ends.append(end)
            off = end
        self.stream_id = stream_id
        self._view = view
        self._size = size
        # what keeping this range costs: all of the buffer it views (a range
        # cut from a whole-object read keeps the whole object alive)
        base_obj = view.obj
        self._footprint = size if base_obj is None else memoryview(base_obj).nbytes
        self._bases = bases
        self._counts = counts
        self._starts = starts
        self._ends = ends

    def __len__(self) -> int:
        """Bytes held in memory (the block cache's measure)."""
        return self._footprint

    def take(
        self, offset: int, end: int, max_bytes: int, out: list[StreamBatch], total: int
    ) -> tuple[int, bool]:
        """Append to ``out`` the batches from the one containing ``offset``
        (or the first after it) that start below ``end``, while ``total``
        (the payload bytes already in ``out``) stays within ``max_bytes``; a
        first batch is taken whatever its size if ``out`` is empty. Returns
        the new total and whether the read is done (``end`` or ``max_bytes``
        reached) rather than this range used up. One loop over the index:
        this is every fetch's path through a cached range."""
        bases = self._bases
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        n = len(bases)
        counts = self._counts
        if i < n and bases[i] + counts[i] <= offset:
            i += 1
        view, sid, starts, ends = self._view, self.stream_id, self._starts, self._ends
        append = out.append
        while i < n:
            base = bases[i]
            if base >= end:
                return total, True
            s, e = starts[i], ends[i]
            if total + e - s > max_bytes and out:
                return total, True
            append(StreamBatch(sid, base, counts[i], view[s:e]))
            total += e - s
            i += 1
        return total, total >= max_bytes

    def batches_from(self, offset: int) -> Iterator[StreamBatch]:
        """Batches from the one containing ``offset`` (or the first after it)."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        if i < len(self._bases) and self._bases[i] + self._counts[i] <= offset:
            i += 1
        view, sid = self._view, self.stream_id
        for k in range(i, len(self._bases)):
            yield StreamBatch(
                sid, self._bases[k], self._counts[k], view[self._starts[k] : self._ends[k]]
            )
