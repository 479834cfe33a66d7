"""Kafka request frames for fuzzing, valid or mutated, from kio's schemas.

The generator walks a request's schema (field order, types, nullability,
tagged fields: what kio's own writer walks) and writes every field itself, so
that at any field it can write what a careless or hostile client would: a null
where Kafka forbids one, a negative or huge length, an element count larger
than what follows, a tagged field no schema knows, an out-of-range number.
Values lean towards the names the test broker knows (its topics, its group),
so that mutated requests reach the handlers' real paths and not only their
"unknown topic" branches.
"""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import fields, is_dataclass
from typing import Any

from hypothesis import strategies as st
from kio.serial._introspect import classify_field, get_field_tag, is_optional

from ingest.handlers import api_table
from ingest.protocol.codec import request_class
from ingest.protocol.records import build_batch

__all__ = [
    "TOPICS",
    "GROUP",
    "served_versions",
    "request_frame",
    "header_bytes",
    "random_frame",
]

TOPICS = ("fuzz-a", "fuzz-b")  # created by the fixtures, 2 partitions each
GROUP = "fuzz-group"  # has committed offsets in the fixtures

# What to write instead of a well-formed field, and how often (in 1/100).
MUTATION_RATE = 6

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1, ">b"),
    "int16": (-(2**15), 2**15 - 1, ">h"),
    "int32": (-(2**31), 2**31 - 1, ">i"),
    "timedelta_i32": (-(2**31), 2**31 - 1, ">i"),
    "int64": (-(2**63), 2**63 - 1, ">q"),
    # kio reads these as Python timedelta / datetime: values past what its
    # native reader takes (a timedelta_i64 is held in microseconds of an
    # int64: +-9.2e15 ms, about 292,000 years; datetimes: years 1-9999) are
    # refused as malformed, so well-formed frames stay inside it. No client
    # sends such values; mutated frames still go past it.
    "timedelta_i64": (-9_223_372_036_854_775, 9_223_372_036_854_775, ">q"),
    "datetime_i64": (-62_135_596_800_000, 253_402_300_799_999, ">q"),
    "uint16": (0, 2**16 - 1, ">H"),
    "uint32": (0, 2**32 - 1, ">I"),
    "float64": (0, 0, ">d"),
}


def served_versions() -> list[tuple[int, int]]:
    """Every (API key, version) the broker serves."""
    return [
        (spec.key, v)
        for spec in sorted(api_table().values(), key=lambda s: s.key)
        for v in range(spec.min_version, spec.max_version + 1)
    ]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def header_bytes(
    api_key: int, version: int, correlation_id: int, client_id: bytes | None = b"fuzz"
) -> bytes:
    cls = request_class(api_key, version)
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        head += struct.pack(">h", len(client_id)) + client_id
    return head + (b"\0" if cls.__flexible__ else b"")


class _Writer:
    """Writes one request body, drawing values and mutations from ``draw``."""

    def __init__(self, draw: Any, mutate: bool) -> None:
        self.draw = draw
        self.mutate = mutate

    def _mutating(self) -> bool:
        return self.mutate and self.draw(st.integers(0, 99)) < MUTATION_RATE

    # --- lengths ---------------------------------------------------------------------
    def length(self, n: int | None, compact: bool, wide: bool) -> bytes:
        """A length prefix for ``n`` items (None: null), perhaps a wrong one."""
        if self._mutating():
            kind = self.draw(st.sampled_from(["null", "negative", "huge", "more"]))
            if kind == "null":
                n = None
            elif kind == "huge":
                n = self.draw(st.sampled_from([2**15 - 1, 2**31 - 2, 2**32 - 2]))
            elif kind == "more":
                n = (n or 0) + self.draw(st.integers(1, 5))
            elif not compact:  # negative lengths exist only in legacy encodings
                bits = 31 if wide else 15
                return struct.pack(">i" if wide else ">h", self.draw(st.integers(-(2**bits), -2)))
        if compact:
            return uvarint(0 if n is None else min(n + 1, 2**35 - 1))
        if n is None:
            n = -1
        limit = 2**31 - 1 if wide else 2**15 - 1
        return struct.pack(">i" if wide else ">h", min(n, limit))

    # --- values ----------------------------------------------------------------------
    def integer(self, kafka_type: str, name: str) -> bytes:
        lo, hi, fmt = _INT_RANGES[kafka_type]
        if fmt == ">q" and self._mutating():
            return struct.pack(fmt, self.draw(st.integers(-(2**63), 2**63 - 1)))
        if kafka_type == "float64":
            return struct.pack(fmt, self.draw(st.floats(allow_nan=True)))
        if name in ("partition_index", "partition", "index", "partition_indexes"):
            small = st.integers(-2, 3)
        elif name in ("timestamp", "committed_offset", "offset", "fetch_offset"):
            small = st.sampled_from([-5, -4, -3, -2, -1, 0, 1, int(time.time() * 1000)])
        else:
            small = st.integers(-2, 4)
        value = self.draw(
            st.one_of(small, st.sampled_from([lo, hi, -1, 0]), st.integers(lo, hi))
            if lo < 0
            else st.one_of(st.integers(0, 4), st.integers(lo, hi))
        )
        return struct.pack(fmt, value)

    def text(self, name: str) -> bytes:
        if name in ("name", "topic", "resource_name", "topic_names"):
            pool = [*TOPICS, "fuzz-new", "", "__consumer_offsets", "a" * 250]
        elif name in ("group_id", "key", "groups", "groups_names", "coordinator_keys"):
            pool = [GROUP, "", "fuzz-other-group"]
        elif name == "protocol_type":
            pool = ["consumer", ""]
        else:
            pool = [""]
        if self._mutating():
            return bytes(self.draw(st.binary(max_size=8)))  # perhaps not UTF-8
        raw = self.draw(
            st.one_of(st.sampled_from(pool).map(str.encode), st.text(max_size=20).map(str.encode))
        )
        return bytes(raw)

    def blob(self, kafka_type: str) -> bytes:
        if kafka_type == "records" and self.draw(st.booleans()):
            n = self.draw(st.integers(1, 3))
            now = int(time.time() * 1000)
            batch = bytearray(build_batch([(b"k", b"v", [], now)] * n))
            if self.mutate and self.draw(st.booleans()):
                # Damage the batch header (offsets, count, sizes, attributes...)
                at = self.draw(st.integers(0, min(len(batch), 61) - 1))
                batch[at] = self.draw(st.integers(0, 255))
            return bytes(batch)
        return bytes(self.draw(st.binary(max_size=40)))

    def sized(self, data: bytes | None, flexible: bool, wide: bool) -> bytes:
        head = self.length(None if data is None else len(data), flexible, wide)
        return head + (data or b"")

    def field_value(self, f: Any, kafka_type: str, flexible: bool, nullable: bool) -> bytes:
        if kafka_type in _INT_RANGES:
            return self.integer(kafka_type, f.name)
        if kafka_type == "bool":
            if self._mutating():
                return bytes([self.draw(st.sampled_from([2, 255]))])  # neither 0 nor 1
            return bytes([self.draw(st.integers(0, 1))])
        if kafka_type == "int8":
            return self.integer("int8", f.name)
        if kafka_type == "uuid":
            return self.draw(st.sampled_from([bytes(16), uuid.uuid4().bytes, b"\xff" * 16]))
        if kafka_type == "string":
            value = None if nullable and self.draw(st.integers(0, 9)) == 0 else self.text(f.name)
            return self.sized(value, flexible, wide=False)
        if kafka_type in ("bytes", "records"):
            value = (
                None if nullable and self.draw(st.integers(0, 9)) == 0 else self.blob(kafka_type)
            )
            return self.sized(value, flexible, wide=True)
        raise AssertionError(f"no generator for {kafka_type}")

    # --- entities --------------------------------------------------------------------
    def entity(self, cls: type, depth: int = 0) -> bytes:
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        out = bytearray()
        tagged: list[tuple[int, bytes]] = []
        for f in fields(cls):
            kind = classify_field(f)
            nullable = is_optional(f)
            kafka_type = f.metadata.get("kafka_type", "")
            if kind.is_array:
                if nullable and self.draw(st.integers(0, 5)) == 0:
                    value = self.length(None, flexible, wide=True)
                else:
                    n = self.draw(st.integers(0, 3 if depth < 2 else 1))
                    value = self.length(n, flexible, wide=True)
                    for _ in range(n):
                        if is_dataclass(kind.type_):
                            value += self.entity(kind.type_, depth + 1)
                        else:
                            value += self.field_value(f, kafka_type, flexible, nullable=False)
            elif is_dataclass(kind.type_):
                inner = self.entity(kind.type_, depth + 1)
                if nullable:
                    marker = self.draw(
                        st.sampled_from([1, 1, 1, -1] + ([0, 7] if self.mutate else []))
                    )
                    value = struct.pack(">b", marker) + (inner if marker == 1 else b"")
                else:
                    value = inner
            else:
                value = self.field_value(f, kafka_type, flexible, nullable)
            tag = get_field_tag(f)
            if tag is None:
                out += value
            elif self.draw(st.booleans()):
                tagged.append((int(tag), value))
        if flexible:
            if self.mutate and self.draw(st.integers(0, 9)) == 0:
                # tagged fields no schema knows, or a known one with a wrong size
                for _ in range(self.draw(st.integers(1, 3))):
                    tag = self.draw(st.integers(0, 2**31))
                    payload = self.draw(st.binary(max_size=6))
                    tagged.append((tag, payload))
            out += uvarint(len(tagged))
            for tag, value in sorted(tagged):
                size = len(value)
                if self._mutating():
                    size = self.draw(st.sampled_from([0, size + 1, 2**31, 2**32 - 1]))
                out += uvarint(tag) + uvarint(size) + value
        return bytes(out)


@st.composite
def request_frame(
    draw: Any, api_key: int, version: int, mutate: bool = True, correlation_id: int = 1
) -> bytes:
    """One request frame (without its size prefix), well-formed or mutated."""
    writer = _Writer(draw, mutate)
    body = writer.entity(request_class(api_key, version))
    client_id: bytes | None = b"fuzz"
    if mutate and draw(st.integers(0, 19)) == 0:
        client_id = draw(st.one_of(st.none(), st.binary(max_size=10)))
    frame = header_bytes(api_key, version, correlation_id, client_id) + body
    if mutate:
        tail = draw(st.sampled_from(["none"] * 6 + ["truncate", "trailing"]))
        if tail == "truncate":
            frame = frame[: draw(st.integers(0, max(len(frame) - 1, 0)))]
        elif tail == "trailing":
            frame += draw(st.binary(min_size=1, max_size=16))
    return frame


@st.composite
def random_frame(draw: Any, api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """A valid header for ``api_key``/``version`` and a body of random bytes."""
    body = draw(st.binary(max_size=200))
    return header_bytes(api_key, version, correlation_id) + body
