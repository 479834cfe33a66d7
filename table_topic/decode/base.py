"""The decoder interface and the Confluent wire format prefix."""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from typing import Any

import pyarrow as pa

from table_topic.errors import InvalidDataError

__all__ = ["PayloadDecoder", "split_wire_format", "MAGIC"]

MAGIC = 0
_ID = struct.Struct(">I")


def split_wire_format(payload: bytes) -> tuple[int, memoryview]:
    """``(schema_id, body)`` of a Confluent-framed payload (magic byte 0 + 4-byte id)."""
    if len(payload) < 5 or payload[0] != MAGIC:
        raise InvalidDataError(
            "payload is not in the Confluent wire format (magic byte 0 + schema id)"
        )
    return _ID.unpack_from(payload, 1)[0], memoryview(payload)[5:]


class PayloadDecoder(ABC):
    """Decodes payloads written with one schema into Python values of ``arrow_type``.

    Thread-safe: decoders are shared by the conversion threads.
    """

    schema_id: int
    arrow_type: pa.DataType
    #: ``body`` passed to :meth:`decode` still carries format-specific framing
    #: after the 5-byte prefix (Protobuf's message indexes); decoders strip it.
    schema_type: str = "AVRO"

    @abstractmethod
    def decode(self, body: memoryview | bytes) -> Any:
        """One payload body (after the 5-byte prefix). Raises InvalidDataError."""

    def decode_column(self, bodies: list[memoryview | bytes]) -> pa.Array | None:
        """A bulk fast path: all bodies as one Arrow array, or None when not offered.

        Raises on any bad body; the caller then falls back to :meth:`decode` per body.
        """
        return None
