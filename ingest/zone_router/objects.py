"""Router objects: the record batches a broker received for partitions it
does not lead, stored for their leaders to read.

An object holds one segment per partition, back to back. A segment is
self-describing, so that a leader reading a byte range can check that the
range is what it was told it is (the partition it names, untouched bytes)::

    magic  b"TLRS"                4 bytes
    topic length                  u16, then the topic name in UTF-8
    partition                     i32
    records length                i32
    CRC-32C of the records        u32
    records                       the producer's record batches, as sent

Keys are ``router/<node id of the writer>/<ms since epoch, 13 digits>-<hex>``:
the time lets any broker remove orphans (objects whose writer died before it
deleted them) by age alone.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

__all__ = [
    "PREFIX",
    "RouterFormatError",
    "Segment",
    "SegmentRef",
    "encode_segments",
    "is_router_key",
    "key_age_s",
    "key_writer",
    "new_key",
    "read_segment",
]

PREFIX = "router/"
_MAGIC = b"TLRS"
_HEAD = struct.Struct(">4sH")
_TAIL = struct.Struct(">iiI")
_KEY = re.compile(r"router/(\d{1,9})/(\d{13})-[0-9a-f]{32}")


class RouterFormatError(ValueError):
    """Bytes that are not the segment they were said to be."""


@dataclass(frozen=True, slots=True)
class Segment:
    topic: str
    partition: int
    records: bytes | memoryview


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """Where one partition's segment lies in its object."""

    topic: str
    partition: int
    position: int
    size: int


def new_key(node_id: int, now_s: float | None = None) -> str:
    ms = int((time.time() if now_s is None else now_s) * 1000)
    return f"{PREFIX}{node_id}/{ms:013d}-{uuid.uuid4().hex}"


def is_router_key(key: str, writer: int | None = None) -> bool:
    """Whether ``key`` is a router object's key (written by node ``writer``, if given)."""
    m = _KEY.fullmatch(key)
    return m is not None and (writer is None or int(m.group(1)) == writer)


def key_writer(key: str) -> int | None:
    m = _KEY.fullmatch(key)
    return int(m.group(1)) if m else None


def key_age_s(key: str, now_s: float | None = None) -> float | None:
    """Seconds since the object was written, or None for a key not ours."""
    m = _KEY.fullmatch(key)
    if m is None:
        return None
    return (time.time() if now_s is None else now_s) - int(m.group(2)) / 1000


def encode_segments(segments: Sequence[Segment]) -> tuple[bytes, list[SegmentRef]]:
    """The object's bytes and where each segment lies in it (in order)."""
    out = bytearray()
    refs: list[SegmentRef] = []
    for s in segments:
        name = s.topic.encode()
        start = len(out)
        out += _HEAD.pack(_MAGIC, len(name))
        out += name
        out += _TAIL.pack(s.partition, len(s.records), crc32c.crc32c(s.records))
        out += s.records
        refs.append(SegmentRef(s.topic, s.partition, start, len(out) - start))
    return bytes(out), refs


def read_segment(data: bytes | memoryview, ref: SegmentRef, base: int = 0) -> memoryview:
    """The records of ``ref``'s segment in ``data`` (the object's bytes from
    position ``base`` on), checked against ``ref``: the segment must name the
    same partition, span exactly ``ref.size`` bytes and match its CRC."""
    view = memoryview(data)
    pos = ref.position - base
    if pos < 0 or ref.size < _HEAD.size + _TAIL.size or pos + ref.size > len(view):
        raise RouterFormatError(f"segment {ref} lies outside the bytes read")
    seg = view[pos : pos + ref.size]
    magic, name_len = _HEAD.unpack_from(seg, 0)
    if magic != _MAGIC:
        raise RouterFormatError("not a router segment")
    at = _HEAD.size + name_len
    if at + _TAIL.size > len(seg) or bytes(seg[_HEAD.size : at]) != ref.topic.encode():
        raise RouterFormatError(f"segment is not of topic {ref.topic!r}")
    partition, length, crc = _TAIL.unpack_from(seg, at)
    records = seg[at + _TAIL.size :]
    if partition != ref.partition or length != len(records):
        raise RouterFormatError(f"segment is not {ref.topic}-{ref.partition} of {ref.size} bytes")
    if crc32c.crc32c(records) != crc:
        raise RouterFormatError(f"segment of {ref.topic}-{ref.partition} fails its CRC")
    return records
