"""Render a FileDescriptorProto as ``.proto`` text: the canonical form the registry stores and
returns for Protobuf schemas, whether they arrived as text or as base64 descriptors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2

__all__ = ["render_proto"]

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    _F.TYPE_DOUBLE: "double",
    _F.TYPE_FLOAT: "float",
    _F.TYPE_INT64: "int64",
    _F.TYPE_UINT64: "uint64",
    _F.TYPE_INT32: "int32",
    _F.TYPE_FIXED64: "fixed64",
    _F.TYPE_FIXED32: "fixed32",
    _F.TYPE_BOOL: "bool",
    _F.TYPE_STRING: "string",
    _F.TYPE_BYTES: "bytes",
    _F.TYPE_UINT32: "uint32",
    _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64",
    _F.TYPE_SINT32: "sint32",
    _F.TYPE_SINT64: "sint64",
}
_MAX_FIELD = 536870911


def _quote(value: str | bytes) -> str:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    out = []
    for byte in raw:
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _literal(field: Any, value: Any) -> str:
    if field.type == field.TYPE_ENUM:
        return str(field.enum_type.values_by_number[value].name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | bytes):
        return _quote(value)
    return repr(value) if isinstance(value, float) else str(value)


def _option_items(options: Any) -> list[str]:
    items = []
    for field, value in options.ListFields():
        name = f"({field.full_name})" if field.is_extension else field.name
        if field.is_repeated or field.message_type is not None:
            continue  # aggregate and repeated options are not rendered
        items.append(f"{name} = {_literal(field, value)}")
    return items


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _ranges(ranges: Sequence[Any], exclusive_end: bool) -> str:
    out = []
    for r in ranges:
        end = r.end - 1 if exclusive_end else r.end
        if end == r.start:
            out.append(str(r.start))
        else:
            out.append(f"{r.start} to {'max' if end >= _MAX_FIELD else end}")
    return ", ".join(out)


class _Renderer:
    def __init__(self, proto: descriptor_pb2.FileDescriptorProto) -> None:
        self.proto = proto
        self.proto3 = proto.syntax == "proto3"
        self.lines: list[str] = []
        self.maps: dict[str, descriptor_pb2.DescriptorProto] = {}
        self._index_maps(proto.package, proto.message_type)

    def _index_maps(self, prefix: str, messages: Sequence[descriptor_pb2.DescriptorProto]) -> None:
        for msg in messages:
            full = f"{prefix}.{msg.name}" if prefix else msg.name
            if msg.options.map_entry:
                self.maps["." + full] = msg
            self._index_maps(full, msg.nested_type)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def _type(self, field: descriptor_pb2.FieldDescriptorProto) -> str:
        if field.type in _SCALARS:
            return _SCALARS[field.type]
        return str(field.type_name)

    def _field(
        self, depth: int, field: descriptor_pb2.FieldDescriptorProto, in_oneof: bool
    ) -> None:
        entry = self.maps.get(field.type_name) if field.type == _F.TYPE_MESSAGE else None
        if entry is not None and field.label == _F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            head = f"map<{self._type(key)}, {self._type(value)}>"
        else:
            label = ""
            if not in_oneof:
                if field.label == _F.LABEL_REPEATED:
                    label = "repeated "
                elif field.label == _F.LABEL_REQUIRED:
                    label = "required "
                elif not self.proto3 or field.proto3_optional:
                    label = "optional "
            head = label + self._type(field)
        options = _option_items(field.options)
        if field.HasField("default_value"):
            if field.type == _F.TYPE_STRING:
                default = _quote(field.default_value)
            elif field.type == _F.TYPE_BYTES:
                default = f'"{field.default_value}"'  # already C-escaped in descriptors
            else:
                default = field.default_value
            options.insert(0, f"default = {default}")
        if field.HasField("json_name") and field.json_name != _camel(field.name):
            options.append(f"json_name = {_quote(field.json_name)}")
        suffix = f" [{', '.join(options)}]" if options else ""
        self.emit(depth, f"{head} {field.name} = {field.number}{suffix};")

    def _options(self, depth: int, options: Any) -> None:
        for item in _option_items(options):
            self.emit(depth, f"option {item};")

    def _reserved(
        self, depth: int, ranges: Sequence[Any], names: Sequence[str], exclusive: bool
    ) -> None:
        if ranges:
            self.emit(depth, f"reserved {_ranges(ranges, exclusive)};")
        if names:
            self.emit(depth, "reserved " + ", ".join(_quote(n) for n in names) + ";")

    def _enum(self, depth: int, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        self.emit(depth, f"enum {enum.name} {{")
        self._options(depth + 1, enum.options)
        for value in enum.value:
            options = _option_items(value.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            self.emit(depth + 1, f"{value.name} = {value.number}{suffix};")
        self._reserved(depth + 1, enum.reserved_range, enum.reserved_name, exclusive=False)
        self.emit(depth, "}")

    def _extensions(
        self, depth: int, fields: Sequence[descriptor_pb2.FieldDescriptorProto]
    ) -> None:
        by_extendee: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, group in by_extendee.items():
            self.emit(depth, f"extend {extendee} {{")
            for field in group:
                self._field(depth + 1, field, in_oneof=False)
            self.emit(depth, "}")

    def _message(self, depth: int, msg: descriptor_pb2.DescriptorProto) -> None:
        self.emit(depth, f"message {msg.name} {{")
        inner = depth + 1
        self._options(inner, msg.options)
        # Nested types keep their order (message indexes in the wire format depend on it):
        # map entries are created where their map field stands, so nested messages that
        # precede an entry are printed just before that field.
        nested = list(msg.nested_type)
        position = {n.name: i for i, n in enumerate(nested)}
        printed_nested = 0

        def nested_until(stop: int) -> None:
            nonlocal printed_nested
            while printed_nested < stop:
                candidate = nested[printed_nested]
                printed_nested += 1
                if not candidate.options.map_entry:
                    self._message(inner, candidate)

        printed_oneofs: set[int] = set()
        for field in msg.field:
            if field.HasField("oneof_index") and not field.proto3_optional:
                index = field.oneof_index
                if index in printed_oneofs:
                    continue
                printed_oneofs.add(index)
                self.emit(inner, f"oneof {msg.oneof_decl[index].name} {{")
                self._options(inner + 1, msg.oneof_decl[index].options)
                for member in msg.field:
                    if (
                        member.HasField("oneof_index")
                        and member.oneof_index == index
                        and not member.proto3_optional
                    ):
                        self._field(inner + 1, member, in_oneof=True)
                self.emit(inner, "}")
                continue
            entry = field.type_name.rsplit(".", 1)[-1]
            if (
                field.type == _F.TYPE_MESSAGE
                and entry in position
                and nested[position[entry]].options.map_entry
            ):
                nested_until(position[entry] + 1)
            self._field(inner, field, in_oneof=False)
        nested_until(len(nested))
        for enum in msg.enum_type:
            self._enum(inner, enum)
        if msg.extension_range:
            self.emit(inner, f"extensions {_ranges(msg.extension_range, exclusive_end=True)};")
        self._extensions(inner, msg.extension)
        self._reserved(inner, msg.reserved_range, msg.reserved_name, exclusive=True)
        self.emit(depth, "}")

    def render(self) -> str:
        proto = self.proto
        self.emit(0, f'syntax = "{proto.syntax or "proto2"}";')
        if proto.package:
            self.emit(0, f"package {proto.package};")
        public, weak = set(proto.public_dependency), set(proto.weak_dependency)
        for i, dep in enumerate(proto.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            self.emit(0, f"import {kind}{_quote(dep)};")
        self._options(0, proto.options)
        for msg in proto.message_type:
            self._message(0, msg)
        for enum in proto.enum_type:
            self._enum(0, enum)
        self._extensions(0, proto.extension)
        for service in proto.service:
            self.emit(0, f"service {service.name} {{")
            self._options(1, service.options)
            for method in service.method:
                cs = "stream " if method.client_streaming else ""
                ss = "stream " if method.server_streaming else ""
                self.emit(
                    1,
                    f"rpc {method.name}({cs}{method.input_type}) returns ({ss}{method.output_type});",
                )
            self.emit(0, "}")
        return "\n".join(self.lines) + "\n"


def render_proto(proto: descriptor_pb2.FileDescriptorProto) -> str:
    """``.proto`` text for ``proto``; type names are printed fully qualified (leading dot)."""
    return re.sub(r"\n{3,}", "\n\n", _Renderer(proto).render())
