"""Protobuf payloads: dynamic messages from the registry's descriptors.

Confluent framing after the 5-byte prefix: the message indexes (a zigzag varint
count, then that many zigzag varints; a single 0 byte means the first message).
Type mapping: message -> struct; repeated -> list; map<K, V> -> map; int32,
sint32, sfixed32 -> int32; int64, sint64, sfixed64, uint32, fixed32 -> int64;
uint64, fixed64 -> int64 (values above 2^63-1 are invalid data); float; double;
bool; string; bytes -> binary; enum -> string (the value's name);
google.protobuf.Timestamp -> timestamp[us, UTC]; wrapper types -> their value.
Proto3 scalars without presence read as their default value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from table_topic.decode.base import PayloadDecoder
from table_topic.errors import InvalidDataError, TableTopicError

__all__ = ["ProtobufDecoder", "read_message_indexes"]

_FD = FieldDescriptor
_INT32 = {_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32}
_INT64 = {
    _FD.TYPE_INT64,
    _FD.TYPE_SINT64,
    _FD.TYPE_SFIXED64,
    _FD.TYPE_UINT32,
    _FD.TYPE_FIXED32,
    _FD.TYPE_UINT64,
    _FD.TYPE_FIXED64,
}
_WRAPPERS = {
    "google.protobuf.DoubleValue": pa.float64(),
    "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(),
    "google.protobuf.UInt64Value": pa.int64(),
    "google.protobuf.Int32Value": pa.int32(),
    "google.protobuf.UInt32Value": pa.int64(),
    "google.protobuf.BoolValue": pa.bool_(),
    "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}
_TIMESTAMP = "google.protobuf.Timestamp"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _zigzag_varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidDataError("Protobuf message indexes truncated")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidDataError("Protobuf message index varint too long")
    return (result >> 1) ^ -(result & 1), pos


def read_message_indexes(body: memoryview | bytes) -> tuple[list[int], int]:
    """``(indexes, position of the message bytes)``; ``[0]`` for the single 0 byte."""
    count, pos = _zigzag_varint(body, 0)
    if count == 0:
        return [0], pos
    if count < 0 or count > 64:
        raise InvalidDataError(f"bad Protobuf message index count {count}")
    out = []
    for _ in range(count):
        idx, pos = _zigzag_varint(body, pos)
        out.append(idx)
    return out, pos


def _field_type(fd: FieldDescriptor, stack: tuple[str, ...]) -> pa.DataType:
    if fd.type == _FD.TYPE_MESSAGE:
        msg = fd.message_type
        if msg.GetOptions().map_entry:
            k = _field_type(msg.fields_by_name["key"], stack)
            v = _field_type(msg.fields_by_name["value"], stack)
            return pa.map_(k, v)
        base = message_arrow_type(msg, stack)
    elif fd.type in _INT32:
        base = pa.int32()
    elif fd.type in _INT64:
        base = pa.int64()
    elif fd.type == _FD.TYPE_FLOAT:
        base = pa.float32()
    elif fd.type == _FD.TYPE_DOUBLE:
        base = pa.float64()
    elif fd.type == _FD.TYPE_BOOL:
        base = pa.bool_()
    elif fd.type == _FD.TYPE_STRING or fd.type == _FD.TYPE_ENUM:
        base = pa.string()
    elif fd.type == _FD.TYPE_BYTES:
        base = pa.binary()
    else:
        raise TableTopicError(f"unsupported Protobuf field type {fd.type} ({fd.full_name})")
    if _is_repeated(fd):
        return pa.list_(base)
    return base


def _is_repeated(fd: FieldDescriptor) -> bool:
    is_rep = getattr(fd, "is_repeated", None)
    if is_rep is not None:
        return bool(is_rep)
    return bool(fd.label == _FD.LABEL_REPEATED)


def _is_map(fd: FieldDescriptor) -> bool:
    return bool(fd.type == _FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry)


def message_arrow_type(desc: Descriptor, stack: tuple[str, ...] = ()) -> pa.DataType:
    if desc.full_name == _TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if desc.full_name in _WRAPPERS:
        return _WRAPPERS[desc.full_name]
    if desc.full_name in stack:
        raise TableTopicError(f"recursive Protobuf message {desc.full_name} cannot become a column")
    inner = (*stack, desc.full_name)
    return pa.struct([pa.field(fd.name, _field_type(fd, inner)) for fd in desc.fields])


def _scalar(fd: FieldDescriptor, value: Any) -> Any:
    if fd.type == _FD.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(value)
        return ev.name if ev is not None else str(value)
    if fd.type == _FD.TYPE_MESSAGE:
        return message_to_python(value)
    if fd.type in (_FD.TYPE_UINT64, _FD.TYPE_FIXED64) and value > 0x7FFFFFFFFFFFFFFF:
        raise InvalidDataError(f"{fd.full_name}: {value} does not fit a long")
    return value


def message_to_python(msg: Any) -> Any:
    desc = msg.DESCRIPTOR
    if desc.full_name == _TIMESTAMP:
        return _EPOCH + timedelta(seconds=msg.seconds, microseconds=msg.nanos // 1000)
    if desc.full_name in _WRAPPERS:
        return msg.value
    out: dict[str, Any] = {}
    for fd in desc.fields:
        value = getattr(msg, fd.name)
        if _is_map(fd):
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = [(k, _scalar(vfd, v)) for k, v in value.items()]
        elif _is_repeated(fd):
            out[fd.name] = [_scalar(fd, v) for v in value]
        elif fd.type == _FD.TYPE_MESSAGE and not msg.HasField(fd.name):
            out[fd.name] = None
        elif fd.has_presence and not msg.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _scalar(fd, value)
    return out


def _all_messages(fd: Any) -> list[Descriptor]:
    return list(fd.message_types_by_name.values())


class ProtobufDecoder(PayloadDecoder):
    schema_type = "PROTOBUF"

    def __init__(
        self,
        schema_id: int,
        main: descriptor_pb2.FileDescriptorProto,
        deps: Sequence[descriptor_pb2.FileDescriptorProto],
        message_name: str = "",
    ) -> None:
        self.schema_id = schema_id
        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()
        try:
            for dep in deps:
                if dep.name not in added:
                    pool.Add(dep)
                    added.add(dep.name)
            pool.Add(main)
            self._file = pool.FindFileByName(main.name)
        except (TypeError, KeyError, ValueError) as exc:
            raise TableTopicError(f"cannot load Protobuf schema {schema_id}: {exc}") from exc
        self._classes: dict[tuple[int, ...], Any] = {}
        messages = _all_messages(self._file)
        if not messages:
            raise TableTopicError(f"Protobuf schema {schema_id} defines no message")
        self._default: tuple[int, ...] = (0,)
        if message_name:
            names = [m.full_name for m in messages]
            short = [m.name for m in messages]
            if message_name in names:
                self._default = (names.index(message_name),)
            elif message_name in short:
                self._default = (short.index(message_name),)
            else:
                raise TableTopicError(
                    f"Protobuf schema {schema_id} has no message {message_name!r}"
                )
        self.arrow_type = message_arrow_type(self._descriptor(self._default))

    def _descriptor(self, indexes: tuple[int, ...]) -> Descriptor:
        try:
            desc = self._file.message_types_by_name[
                list(self._file.message_types_by_name)[indexes[0]]
            ]
            for i in indexes[1:]:
                desc = desc.nested_types[i]
        except (IndexError, KeyError) as exc:
            raise InvalidDataError(
                f"no message at index {list(indexes)} in schema {self.schema_id}"
            ) from exc
        return desc

    def _class(self, indexes: tuple[int, ...]) -> Any:
        cls = self._classes.get(indexes)
        if cls is None:
            cls = message_factory.GetMessageClass(self._descriptor(indexes))
            self._classes[indexes] = cls
        return cls

    def decode(self, body: memoryview | bytes) -> Any:
        indexes, pos = read_message_indexes(body)
        key = tuple(indexes)
        if key != self._default:
            raise InvalidDataError(
                f"message index {indexes} is not the table's message {list(self._default)}"
            )
        msg = self._class(key)()
        try:
            msg.ParseFromString(bytes(body[pos:]))
        except Exception as exc:
            raise InvalidDataError(
                f"cannot decode Protobuf with schema {self.schema_id}: {exc}"
            ) from exc
        return message_to_python(msg)

    def decode_plain(self, body: memoryview | bytes) -> Any:
        """A payload without message indexes (by_latest_schema)."""
        msg = self._class(self._default)()
        try:
            msg.ParseFromString(bytes(body))
        except Exception as exc:
            raise InvalidDataError(
                f"cannot decode Protobuf with schema {self.schema_id}: {exc}"
            ) from exc
        return message_to_python(msg)
