"""Produce requests (v3-v11) read without copying their record batches.

kio's generic reader copies every partition's ``records`` out of the frame
(300 us for a 1 MiB request here, several times a plain copy). This reader
builds the same typed entities, but ``records`` is a memoryview into the
frame: the partition's append makes the one copy the log needs. It checks
what Kafka's parser checks: lengths within the frame, null only where the
field is nullable (the transactional id and records), UTF-8 names; unknown
tagged fields are skipped. Anything else raises :class:`ProtocolError`.
"""

from __future__ import annotations

import datetime
import struct
from functools import cache
from typing import Any, cast

from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i16, i32, i32Timedelta

from ingest.protocol.errors import ProtocolError
from ingest.protocol.wire import read_uvarint_checked, skip_tagged_fields

__all__ = ["read_produce_request", "PRODUCE_VERSIONS"]

PRODUCE_VERSIONS = range(3, 12)
_FIRST_FLEXIBLE = 9
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@cache
def _classes(version: int) -> tuple[Any, Any, Any]:
    from importlib import import_module

    m = import_module(f"kio.schema.produce.v{version}.request")
    return m.ProduceRequest, m.TopicProduceData, m.PartitionProduceData


class _Reader:
    __slots__ = ("buf", "pos", "end", "flexible")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible

    def take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise ProtocolError("produce request truncated")
        self.pos = start + n
        return start

    def length(self, nullable: bool, what: str) -> int:
        """A string, bytes or array length; -1 for null."""
        if self.flexible:
            pos = self.pos
            if pos < self.end and self.buf[pos] < 0x80:  # one byte, the usual case
                n = self.buf[pos] - 1
                self.pos = pos + 1
            else:
                n, self.pos = read_uvarint_checked(self.buf, pos)
                n -= 1
        elif what == "string":
            n = _I16.unpack_from(self.buf, self.take(2))[0]
        else:
            n = _I32.unpack_from(self.buf, self.take(4))[0]
        if n < -1 or (n == -1 and not nullable):
            raise ProtocolError(f"invalid {what} length {n} in a produce request")
        return n

    def string(self, nullable: bool) -> str | None:
        n = self.length(nullable, "string")
        if n < 0:
            return None
        start = self.take(n)
        try:
            return str(self.buf[start : start + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"a produce request string is not UTF-8: {exc}") from None

    def count(self, smallest: int) -> int:
        """An array's element count, each element at least ``smallest`` bytes."""
        n = self.length(False, "array")
        if n * smallest > self.end - self.pos:
            raise ProtocolError(f"produce request array of {n} elements overruns the frame")
        return n

    def tags(self) -> None:
        if self.flexible:
            pos = self.pos
            if pos < self.end and self.buf[pos] == 0:  # none, the usual case
                self.pos = pos + 1
            else:
                self.pos = skip_tagged_fields(self.buf, pos)


def read_produce_request(version: int, buf: memoryview, pos: int) -> Any:
    """The kio ``ProduceRequest`` entity of ``version`` from the body at ``pos``."""
    request_cls, topic_cls, partition_cls = _classes(version)
    r = _Reader(buf, pos, version >= _FIRST_FLEXIBLE)
    # the smallest encodings: a partition is its index and a null records
    # field (plus its tag count), a topic its name and an empty array
    part_min = 5 + 1 if r.flexible else 8
    topic_min = 3 if r.flexible else 6
    txn = r.string(nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, r.take(6))
    topics = []
    for _ in range(r.count(topic_min)):
        name = r.string(nullable=False)
        partitions = []
        for _ in range(r.count(part_min)):
            index = _I32.unpack_from(buf, r.take(4))[0]
            n = r.length(True, "records")
            records = None
            if n >= 0:
                start = r.take(n)
                records = buf[start : start + n]
            r.tags()
            # the values were read at their wire width, so kio's phantom
            # types (plain ints and strs at run time) need no range check
            partitions.append(partition_cls(index=cast(i32, index), records=records))
        r.tags()
        topics.append(topic_cls(name=cast(TopicName, name), partition_data=tuple(partitions)))
    r.tags()
    return request_cls(
        transactional_id=cast(TransactionalId | None, txn),
        acks=cast(i16, acks),
        timeout=cast(i32Timedelta, datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=tuple(topics),
    )
