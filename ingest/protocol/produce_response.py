"""Produce responses v3-v11 written straight from the handler's v11 entity.

Every Produce request gets a response, so its encoding is on the produce
path's critical time: kio's generic route (narrowing the v11 entity to the
requested version field by field, then its entity writer) took 30-48 us for
one topic of four partitions at v7-v10, the fixed layout below a few.

The layout (Kafka's ProduceResponse schema; v9+ is flexible: compact arrays
and strings, tagged fields after each struct)::

    responses: [name: string,
                partition_responses: [index: int32, error_code: int16,
                                      base_offset: int64, log_append_time_ms: int64,
                                      log_start_offset: int64 (v5+),
                                      record_errors: [batch_index: int32,
                                                      batch_index_error_message: string?] (v8+),
                                      error_message: string? (v8+)]]
    throttle_time_ms: int32

``encode`` returns ``None`` for what it does not write (v10+'s tagged
``current_leader`` and ``node_endpoints`` when set, a version outside 3-11):
the caller then takes kio's route. The two routes give the same bytes
(tests/fuzz/test_produce_response_fuzz.py).
"""

from __future__ import annotations

import datetime
import struct

from kio.schema.produce.v11.response import ProduceResponse

from ingest.protocol.records import write_uvarint

__all__ = ["encode"]

_HEAD = struct.Struct(">ii")  # size prefix (patched), correlation id
_PART_V3 = struct.Struct(">ihqq")  # index, error, base offset, append time
_PART_V5 = struct.Struct(">ihqqq")  # ... log start offset
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _count(n: int, flexible: bool) -> bytes:
    return write_uvarint(n + 1) if flexible else _I32.pack(n)


def _millis(value: datetime.datetime | None) -> int:
    return -1 if value is None else round(value.timestamp() * 1000)


def encode(version: int, correlation_id: int, response: ProduceResponse) -> bytes | None:
    """The framed response (size prefix, header, body) at ``version``, or
    ``None`` where kio's generic route must write it."""
    if not 3 <= version <= 11 or type(response) is not ProduceResponse:
        return None
    flexible = version >= 9
    if version >= 10 and response.node_endpoints:
        return None
    out = [_HEAD.pack(0, correlation_id)]
    if flexible:
        out.append(b"\x00")  # response header v1: no tagged fields
    out.append(_count(len(response.responses), flexible))
    part = _PART_V5 if version >= 5 else _PART_V3
    for topic in response.responses:
        out.append(_string(topic.name, flexible))
        out.append(_count(len(topic.partition_responses), flexible))
        for p in topic.partition_responses:
            if version >= 10 and (p.current_leader.leader_id != -1 or p.current_leader.leader_epoch != -1):
                return None
            fields = (p.index, p.error_code.value, p.base_offset, _millis(p.log_append_time))
            out.append(part.pack(*fields, p.log_start_offset) if version >= 5 else part.pack(*fields))
            if version >= 8:
                out.append(_count(len(p.record_errors), flexible))
                for e in p.record_errors:
                    out.append(_I32.pack(e.batch_index))
                    out.append(_string(e.batch_index_error_message, flexible))
                    if flexible:
                        out.append(b"\x00")
                out.append(_string(p.error_message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(round(response.throttle_time.total_seconds() * 1000)))
    if flexible:
        out.append(b"\x00")
    frame = bytearray(b"".join(out))
    _I32.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)
