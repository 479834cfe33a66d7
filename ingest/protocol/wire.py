"""Reading Kafka's request encodings: unsigned varints and tagged fields,
failing as a :class:`ProtocolError` (the varints themselves live in
:mod:`ingest.protocol.records`)."""

from __future__ import annotations

from ingest.protocol.errors import KafkaError, ProtocolError
from ingest.protocol.records import read_uvarint

__all__ = ["read_uvarint_checked", "skip_tagged_fields"]


def read_uvarint_checked(buf: memoryview, pos: int) -> tuple[int, int]:
    """``read_uvarint``, at most 5 bytes (Kafka's lengths and tags are int32)."""
    try:
        value, end = read_uvarint(buf, pos)
    except IndexError:
        raise ProtocolError("truncated varint") from None
    except KafkaError as exc:
        raise ProtocolError(str(exc)) from None
    if end - pos > 5:
        raise ProtocolError("varint too long")
    return value, end


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """The position after a tagged-field section (every tag is skipped)."""
    count, pos = read_uvarint_checked(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint_checked(buf, pos)
        size, pos = read_uvarint_checked(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("truncated tagged fields")
    return pos
