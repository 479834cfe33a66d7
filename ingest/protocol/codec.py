"""Request parsing and response encoding on top of kio's generated schemas.

Pure functions over bytes: no sockets, no event loop. Handlers build responses
as plain mappings; :func:`build` turns a mapping into the versioned kio entity,
dropping keys the version lacks and filling zero values for fields the mapping
omits, so one handler serves every version of its API.
"""

from __future__ import annotations

import datetime
import io
import struct
import typing
import uuid
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

from ingest.protocol.errors import KafkaError

__all__ = [
    "RequestHeader",
    "ProtocolError",
    "parse_request_header",
    "request_class",
    "response_class",
    "decode_request",
    "encode_response",
    "build",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class ProtocolError(KafkaError):
    """A frame that cannot be parsed; the connection is closed."""

    error_code = ErrorCode.invalid_request


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


_HDR = struct.Struct(">hhih")


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("truncated tagged fields")
    return pos


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ProtocolError("varint too long")


def parse_request_header(frame: memoryview, flexible: bool | None = None) -> RequestHeader:
    """Parse a request header (v1, or v2 when ``flexible``).

    ``flexible`` None means: look the API version up to decide.
    """
    if len(frame) < _HDR.size:
        raise ProtocolError("request header truncated")
    api_key, api_version, correlation_id, client_len = _HDR.unpack_from(frame, 0)
    pos = _HDR.size
    client_id: str | None = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise ProtocolError("client id truncated")
        client_id = bytes(frame[pos:end]).decode("utf-8", "replace")
        pos = end
    elif client_len != -1:
        raise ProtocolError("invalid client id length")
    if flexible is None:
        flexible = is_flexible(api_key, api_version)
    if flexible:
        pos = _skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


@cache
def request_class(api_key: int, api_version: int) -> type[Entity]:
    return load_request_schema(api_key, api_version)


@cache
def response_class(api_key: int, api_version: int) -> type[Entity]:
    return load_response_schema(api_key, api_version)


@cache
def is_flexible(api_key: int, api_version: int) -> bool:
    return bool(request_class(api_key, api_version).__flexible__)


@cache
def _reader(cls: type[Entity]) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type[Entity]) -> Any:
    return entity_writer(cls)


def decode_request(header: RequestHeader, frame: memoryview) -> Any:
    """Decode the request body that follows ``header`` in ``frame``."""
    cls = request_class(header.api_key, header.api_version)
    try:
        result = _reader(cls)(frame, header.body_offset)
    except KafkaError:
        raise
    except Exception as exc:  # kio raises a variety of errors on bad bytes
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from exc
    # Like Kafka, ignore bytes after the body: some clients pad requests.
    entity = result[0] if isinstance(result, tuple) else result
    return entity


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Entity) -> bytes:
    """Frame a response: size prefix, response header, body.

    The header is v1 (with tagged fields) for flexible versions, except
    ApiVersions, whose response header is always v0 so that clients can read it
    before they know which versions the broker speaks.
    """
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(struct.pack(">i", correlation_id))
    if api_key != 18 and is_flexible(api_key, api_version):
        buf.write(b"\0")
    _writer(type(response))(buf, response)
    data = buf.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return buf.getvalue()


# --- building versioned entities from mappings ---------------------------------

_SCALAR_ZERO: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "uuid": uuid.UUID(int=0),
}


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nested: type[Entity] | None
    is_tuple: bool
    optional: bool
    default: Any  # MISSING if required


@cache
def _plan(cls: type[Entity]) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in fields(cls):
        hint = hints[f.name]
        optional = False
        args = typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, __import__("types").UnionType):
            optional = type(None) in args
            non_none = [a for a in args if a is not type(None)]
            hint = non_none[0] if non_none else hint
        is_tuple = typing.get_origin(hint) is tuple
        inner = typing.get_args(hint)[0] if is_tuple else hint
        nested = (
            inner if isinstance(inner, type) and hasattr(inner, "__dataclass_fields__") else None
        )
        default: Any = MISSING
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        plans.append(
            _FieldPlan(f.name, f.metadata.get("kafka_type"), nested, is_tuple, optional, default)
        )
    return tuple(plans)


def _coerce(kafka_type: str | None, value: Any) -> Any:
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def build(cls: type[Entity], values: Mapping[str, Any]) -> Any:
    """Build the kio entity ``cls`` from a (possibly nested) mapping."""
    kwargs: dict[str, Any] = {}
    for p in _plan(cls):
        if p.name in values:
            v = values[p.name]
            if p.nested is not None and v is not None:
                if p.is_tuple:
                    v = tuple(x if isinstance(x, p.nested) else build(p.nested, x) for x in v)
                elif not isinstance(v, p.nested):
                    v = build(p.nested, v)
            elif p.is_tuple:
                v = tuple(_coerce(p.kafka_type, x) for x in v) if v is not None else v
            else:
                v = _coerce(p.kafka_type, v)
            kwargs[p.name] = v
        elif p.default is not MISSING:
            continue
        elif p.is_tuple:
            kwargs[p.name] = ()
        elif p.nested is not None:
            kwargs[p.name] = None if p.optional else build(p.nested, {})
        elif p.optional:
            kwargs[p.name] = None
        elif p.kafka_type == "string":
            kwargs[p.name] = ""
        elif p.kafka_type == "bytes" or p.kafka_type == "records":
            kwargs[p.name] = b""
        elif p.kafka_type == "datetime_i64":
            kwargs[p.name] = _EPOCH
        else:
            kwargs[p.name] = _SCALAR_ZERO.get(p.kafka_type or "", 0)
    return cls(**kwargs)
