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
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.static.protocol import Entity

from ingest.protocol.errors import KafkaError, ProtocolError
from ingest.protocol.produce_request import PRODUCE_VERSIONS, read_produce_request
from ingest.protocol.records import write_uvarint
from ingest.protocol.wire import read_uvarint_checked as _read_uvarint
from ingest.protocol.wire import skip_tagged_fields as _skip_tagged_fields

__all__ = [
    "RequestHeader",
    "ProtocolError",
    "parse_request_header",
    "request_class",
    "response_class",
    "check_request",
    "decode_request",
    "encode_response",
    "build",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_PRODUCE = 0


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


_HDR = struct.Struct(">hhih")


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


# --- shape check: nulls and lengths against the bytes that are there ---------------
#
# kio's native reader trusts declared lengths: it reserves room for an array's
# declared element count before reading one (a compact array declaring 2**32-2
# elements aborts the process), reads a null array into a field Kafka's schema
# does not mark nullable, and rejects tagged fields it does not know. Before kio
# sees a body, one pass over the schema checks what Kafka's generated parsers
# check: a null only where the field is nullable, no negative length but -1, no
# length beyond the frame (an array may declare at most as many elements as
# the bytes left hold at their smallest encoding). Unknown tagged fields are
# skipped, as Kafka skips them. A failure is a ProtocolError: Kafka cannot parse
# such a request either, and closes the connection.

_Step = Callable[[memoryview, int, list[tuple[int, int, bytes]]], int]

_FIXED_SIZE = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_MAX_STRING = 0x7FFF  # Kafka's limit for a string's length, compact or not


def _read_length(buf: memoryview, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: -1 is null; compact lengths are stored plus one."""
    if compact:
        if pos < len(buf) and buf[pos] < 0x80:  # one byte: lengths below 127
            return buf[pos] - 1, pos + 1
        n, pos = _read_uvarint(buf, pos)
        return n - 1, pos
    s = _I32 if wide else _I16
    if pos + s.size > len(buf):
        raise ProtocolError("length truncated")
    return s.unpack_from(buf, pos)[0], pos + s.size


def _null_or_negative(name: str, n: int, nullable: bool) -> None:
    if n == -1:
        if not nullable:
            raise ProtocolError(f"non-nullable field {name} was serialized as null")
    else:
        raise ProtocolError(f"field {name} has negative length {n}")


def _fixed_step(name: str, size: int) -> _Step:
    def step(buf: memoryview, pos: int, cuts: list[tuple[int, int, bytes]]) -> int:
        pos += size
        if pos > len(buf):
            raise ProtocolError(f"field {name} truncated")
        return pos

    return step


def _sized_step(name: str, compact: bool, nullable: bool, is_bytes: bool) -> _Step:
    def step(buf: memoryview, pos: int, cuts: list[tuple[int, int, bytes]]) -> int:
        n, pos = _read_length(buf, pos, compact, wide=is_bytes)
        if n < 0:
            _null_or_negative(name, n, nullable)
            return pos
        if not is_bytes and n > _MAX_STRING:
            raise ProtocolError(f"string field {name} had invalid length {n}")
        pos += n
        if pos > len(buf):
            raise ProtocolError(f"field {name} truncated")
        return pos

    return step


def _array_step(
    name: str, compact: bool, nullable: bool, element: _Step, element_size: int, fixed: bool
) -> _Step:
    def step(buf: memoryview, pos: int, cuts: list[tuple[int, int, bytes]]) -> int:
        count, pos = _read_length(buf, pos, compact, wide=True)
        if count < 0:
            _null_or_negative(name, count, nullable)
            return pos
        if count * element_size > len(buf) - pos:
            raise ProtocolError(
                f"array field {name} declares {count} elements; the frame holds fewer"
            )
        if fixed:
            return pos + count * element_size
        for _ in range(count):
            pos = element(buf, pos, cuts)
        return pos

    return step


def _struct_step(name: str, element: _Step) -> _Step:
    """A nullable struct (KIP-893): an int8 marker, -1 null or 1 present."""

    def step(buf: memoryview, pos: int, cuts: list[tuple[int, int, bytes]]) -> int:
        if pos >= len(buf):
            raise ProtocolError(f"field {name} truncated")
        marker = struct.unpack_from(">b", buf, pos)[0]
        if marker == -1:
            return pos + 1
        if marker != 1:
            raise ProtocolError(f"field {name} has null marker {marker}")
        return element(buf, pos + 1, cuts)

    return step


@cache
def _shape(cls: type[Entity]) -> tuple[_Step, int, bool]:
    """The check for one entity, the smallest size of its encoding, and
    whether that size is its only size (fixed-size fields, no tagged fields)."""
    flexible = bool(cls.__flexible__)
    ops: list[int | _Step] = []  # runs of fixed-size fields merge into one int
    tagged: dict[int, _Step] = {}
    null_default: set[int] = set()  # nullable string tags: absent means null
    smallest = 1 if flexible else 0  # the tagged field count
    for f in fields(cls):
        kind = classify_field(f)
        tag = get_field_tag(f)
        nullable = is_optional(f)
        kafka_type = f.metadata.get("kafka_type")
        size: int
        if isinstance(kind, EntityField | EntityTupleField):
            inner, size, fixed = _shape(kind.type_)
        elif kafka_type in _FIXED_SIZE:
            size = _FIXED_SIZE[kafka_type]
            inner, fixed = _fixed_step(f.name, size), True
        elif kafka_type in ("string", "bytes", "records"):
            is_bytes = kafka_type != "string"
            # elements of a string array are never null
            inner = _sized_step(f.name, flexible, nullable and not kind.is_array, is_bytes)
            size = 1 if flexible else (4 if is_bytes else 2)
            fixed = False
        else:
            raise TypeError(f"no shape check for {cls.__name__}.{f.name} ({kafka_type})")
        step: int | _Step
        if kind.is_array:
            step = _array_step(f.name, flexible, nullable, inner, max(size, 1), fixed)
            size = 1 if flexible else 4
        elif isinstance(kind, EntityField) and nullable:
            step, size = _struct_step(f.name, inner), 1
        else:
            step = size if fixed else inner
        if tag is not None:
            tagged[int(tag)] = inner if isinstance(step, int) else step
            if nullable and not kind.is_array and kafka_type in ("string", "bytes", "records"):
                null_default.add(int(tag))
            continue
        smallest += size
        if isinstance(step, int) and ops and isinstance(ops[-1], int):
            ops[-1] += step
        else:
            ops.append(step)
    plan = tuple(ops)
    name = cls.__name__

    def check(buf: memoryview, pos: int, cuts: list[tuple[int, int, bytes]]) -> int:
        end = len(buf)
        for op in plan:
            if op.__class__ is int:
                pos += op
                if pos > end:
                    raise ProtocolError(f"{name} truncated")
            else:
                pos = op(buf, pos, cuts)  # type: ignore[operator]
        if flexible:
            if pos < end and buf[pos] == 0:  # no tagged fields, the usual case
                return pos + 1
            return _check_tagged_fields(buf, pos, cuts, tagged, null_default)
        return pos

    only_fixed = not flexible and all(isinstance(op, int) for op in plan)
    return check, smallest, only_fixed


def _check_tagged_fields(
    buf: memoryview,
    pos: int,
    cuts: list[tuple[int, int, bytes]],
    known: dict[int, _Step],
    null_default: set[int],
) -> int:
    """Check the tagged fields at ``pos``; unknown ones, and a nullable string
    sent as null (kio cannot read a tagged null, e.g. Fetch v12's ClusterId;
    leaving it out gives the same null), are cut."""
    start = pos
    count, pos = _read_uvarint(buf, pos)
    if 2 * count > len(buf) - pos:  # a tag and a size take a byte each at least
        raise ProtocolError(f"{count} tagged fields declared; the frame holds fewer")
    kept: list[bytes] = []
    for _ in range(count):
        entry = pos
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise ProtocolError(f"tagged field {tag} truncated")
        step = known.get(tag)
        if step is not None:
            inner: list[tuple[int, int, bytes]] = []
            if step(buf[:end], pos, inner) != end:
                raise ProtocolError(f"tagged field {tag} does not fill its declared size")
            if inner:
                raise ProtocolError(f"tagged field {tag} holds unknown tagged fields")
            if not (tag in null_default and size == 1 and buf[pos] == 0):
                kept.append(bytes(buf[entry:end]))
        pos = end
    if len(kept) != count:  # unknown tags (Kafka ignores them) and tagged nulls
        cuts.append((start, pos, write_uvarint(len(kept)) + b"".join(kept)))
    return pos


def check_request(header: RequestHeader, frame: memoryview) -> tuple[memoryview, int]:
    """Check the body of ``frame`` against its schema; return where kio may read it.

    Raises :class:`ProtocolError` for what Kafka would not parse either. The
    body is read in place, or from a copy without the tagged fields Kafka ignores.
    """
    check, _, _ = _shape(request_class(header.api_key, header.api_version))
    cuts: list[tuple[int, int, bytes]] = []
    end = check(frame, header.body_offset, cuts)
    if not cuts:
        return frame, header.body_offset
    parts: list[bytes | memoryview] = []
    pos = header.body_offset
    for start, stop, replacement in cuts:
        parts += (frame[pos:start], replacement)
        pos = stop
    parts.append(frame[pos:end])
    return memoryview(b"".join(parts)), 0


def decode_request(header: RequestHeader, frame: memoryview) -> Any:
    """Decode the request body that follows ``header`` in ``frame``."""
    try:
        cls = request_class(header.api_key, header.api_version)
    except Exception as exc:  # kio knows no such API or version
        raise ProtocolError(f"unknown request {header.api_key} v{header.api_version}") from exc
    if header.api_key == _PRODUCE and header.api_version in PRODUCE_VERSIONS:
        try:  # the hot path: record batches stay in the frame
            return read_produce_request(header.api_version, frame, header.body_offset)
        except KafkaError:
            raise
        except Exception as exc:  # a phantom type's range check
            raise ProtocolError(f"malformed {cls.__name__}: {exc}") from exc
    body, offset = check_request(header, frame)
    try:
        result = _reader(cls)(body, offset)
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


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str, request: Entity
) -> bytes:
    """Frame a request (for a broker talking to another): size prefix,
    request header v1 (v2, with tagged fields, for flexible versions), body."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    client = client_id.encode()
    buf.write(_HDR.pack(api_key, api_version, correlation_id, len(client)))
    buf.write(client)
    if is_flexible(api_key, api_version):
        buf.write(b"\0")
    _writer(type(request))(buf, request)
    data = buf.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return buf.getvalue()


def decode_response(api_key: int, api_version: int, frame: memoryview | bytes) -> tuple[int, Any]:
    """(correlation id, response entity) of a response frame (without its size prefix)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise ProtocolError("response header truncated")
    (correlation_id,) = struct.unpack_from(">i", view, 0)
    pos = 4
    if api_key != 18 and is_flexible(api_key, api_version):
        pos = _skip_tagged_fields(view, pos)
    try:
        result = _reader(response_class(api_key, api_version))(view, pos)
    except Exception as exc:  # kio raises a variety of errors on bad bytes
        raise ProtocolError(f"malformed response to API {api_key}: {exc}") from exc
    entity = result[0] if isinstance(result, tuple) else result
    return correlation_id, entity


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
