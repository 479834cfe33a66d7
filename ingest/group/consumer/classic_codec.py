"""Kafka's ConsumerProtocol: the subscription a classic member puts in its
JoinGroup metadata and the assignment its SyncGroup answer carries. A
consumer group that has classic members (online migration, KIP-848) reads
their subscriptions and hands them the server-side assignor's choice in this
encoding. Bounds-checked: metadata that does not parse is ``None``.

Subscription (version 0-3): version i16, topics [string], user data bytes,
owned partitions [topic string, [i32]] (v1+), generation i32 (v2+), rack
string (v3+). Assignment: version i16, partitions [topic string, [i32]],
user data bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "Subscription",
    "decode_subscription",
    "decode_assignment",
    "encode_assignment",
    "encode_subscription",
]

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: frozenset[Partition] = field(default_factory=frozenset)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def string(self) -> str:
        n = self.i16()
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("bad string")
        out = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return out

    def count(self, item_size: int) -> int:
        n = self.i32()
        if n < 0 or self.pos + n * item_size > len(self.data):
            raise ValueError("bad array length")
        return n

    def skip_bytes(self) -> None:
        n = self.i32()
        if n > 0:
            if self.pos + n > len(self.data):
                raise ValueError("bad bytes length")
            self.pos += n

    def partitions(self) -> set[Partition]:
        out: set[Partition] = set()
        for _ in range(self.count(6)):
            topic = self.string()
            for _ in range(self.count(4)):
                out.add((topic, self.i32()))
        return out


def decode_subscription(metadata: bytes) -> Subscription | None:
    try:
        r = _Reader(metadata)
        version = r.i16()
        if version < 0:
            return None
        topics = tuple(r.string() for _ in range(r.count(2)))
        r.skip_bytes()  # user data
        owned: set[Partition] = set()
        if version >= 1 and r.pos < len(metadata):
            owned = r.partitions()
        return Subscription(version, topics, frozenset(owned))
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def decode_assignment(data: bytes) -> set[Partition] | None:
    if not data:
        return set()
    try:
        r = _Reader(data)
        if r.i16() < 0:
            return None
        return r.partitions()
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_assignment(partitions: Iterable[Partition], version: int = 0) -> bytes:
    out = struct.pack(">h", version) + _encode_partitions(partitions)
    return out + struct.pack(">i", -1)  # no user data


def encode_subscription(
    topics: Iterable[str], owned: Iterable[Partition] = (), version: int = 1
) -> bytes:
    """A ConsumerProtocol subscription (v0, or v1 with owned partitions), as a
    classic client puts it in its JoinGroup metadata."""
    names = sorted(topics)
    out = bytearray(struct.pack(">hi", version, len(names)))
    for name in names:
        raw = name.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1)  # no user data
    if version >= 1:
        out += _encode_partitions(owned)
    return bytes(out)


def _encode_partitions(partitions: Iterable[Partition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(struct.pack(">i", len(by_topic)))
    for topic, ps in by_topic.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(ps))
        out += struct.pack(f">{len(ps)}i", *ps)
    return bytes(out)
