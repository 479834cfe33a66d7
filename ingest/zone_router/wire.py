"""The routed produce request a proxy broker sends a leader, inside a Kafka
Envelope (API key 58, ``request_data``).

It carries no records: only the router object's key and, per partition, where
that partition's segment lies in the object, plus what the Produce request
said besides its records (acks, timeout, transactional id) and the client's
id. The Envelope's own fields carry the client's principal
(``request_principal``) and host (``client_host_address``, UTF-8 text).

Layout (big-endian)::

    magic b"TLZR", version u8 (1)
    key                 str
    acks                i16
    timeout ms          i32
    transactional id    nullable str
    client id           nullable str
    count               i32, then per partition:
        topic str, partition i32, position i64, size i32

where str is a u16 length and UTF-8 bytes, and a nullable str has length
0xFFFF for null. The leader answers with the Envelope's ``response_data``
holding a Produce v11 response (the response frame without its size prefix).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ingest.zone_router.objects import SegmentRef

__all__ = ["RoutedRequest", "WireError", "decode", "encode"]

_MAGIC = b"TLZR"
_VERSION = 1
_NULL = 0xFFFF
_U16 = struct.Struct(">H")
_FIXED = struct.Struct(">hi")
_PART = struct.Struct(">iqi")
_I32 = struct.Struct(">i")


class WireError(ValueError):
    """Bytes that are not a routed produce request."""


@dataclass(frozen=True, slots=True)
class RoutedRequest:
    key: str
    acks: int
    timeout_ms: int
    transactional_id: str | None
    client_id: str | None
    segments: tuple[SegmentRef, ...]


def _put_str(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _U16.pack(_NULL)
        return
    raw = value.encode()
    if len(raw) >= _NULL:
        raise WireError("string too long")
    out += _U16.pack(len(raw))
    out += raw


def encode(req: RoutedRequest) -> bytes:
    out = bytearray(_MAGIC)
    out.append(_VERSION)
    _put_str(out, req.key)
    out += _FIXED.pack(req.acks, req.timeout_ms)
    _put_str(out, req.transactional_id)
    _put_str(out, req.client_id)
    out += _I32.pack(len(req.segments))
    for s in req.segments:
        _put_str(out, s.topic)
        out += _PART.pack(s.partition, s.position, s.size)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, st: struct.Struct) -> tuple[int, ...]:
        if self.pos + st.size > len(self.data):
            raise WireError("truncated")
        values = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return values

    def text(self) -> str | None:
        (n,) = self.take(_U16)
        if n == _NULL:
            return None
        if self.pos + n > len(self.data):
            raise WireError("truncated")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise WireError("a string is not UTF-8") from exc

    def required(self) -> str:
        value = self.text()
        if value is None:
            raise WireError("a required string is null")
        return value


def decode(data: bytes) -> RoutedRequest:
    if data[:4] != _MAGIC or len(data) < 5:
        raise WireError("not a routed produce request")
    if data[4] != _VERSION:
        raise WireError(f"routed produce version {data[4]} is not {_VERSION}")
    r = _Reader(data)
    r.pos = 5
    key = r.required()
    acks, timeout_ms = r.take(_FIXED)
    transactional_id = r.text()
    client_id = r.text()
    (count,) = r.take(_I32)
    if count < 0 or count > (len(data) - r.pos) // (_U16.size + _PART.size):
        raise WireError(f"bad partition count {count}")
    segments = []
    for _ in range(count):
        topic = r.required()
        partition, position, size = r.take(_PART)
        if position < 0 or size <= 0:
            raise WireError(f"bad segment range {position}+{size}")
        segments.append(SegmentRef(topic, partition, position, size))
    if r.pos != len(data):
        raise WireError("trailing bytes")
    return RoutedRequest(key, acks, timeout_ms, transactional_id, client_id, tuple(segments))
