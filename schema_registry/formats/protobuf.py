"""Protobuf: ``.proto`` text compiled with protoc (grpcio-tools), or base64 FileDescriptorProtos
as confluent-kafka's serializers send them; wire-compatibility rules over the descriptors."""

from __future__ import annotations

import base64
import binascii
import importlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from schema_registry.errors import InvalidSchema
from schema_registry.formats.base import ParsedSchema, ResolvedReference, SchemaFormat
from schema_registry.formats.protobuf_text import render_proto
from schema_registry.formats.protoc import run_protoc

__all__ = ["ProtobufFormat", "ProtobufSchema"]

_F = descriptor_pb2.FieldDescriptorProto
# Scalar types that share a wire encoding and reinterpret each other's values.
_WIRE_GROUPS = (
    {_F.TYPE_INT32, _F.TYPE_UINT32, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_BOOL},
    {_F.TYPE_SINT32, _F.TYPE_SINT64},
    {_F.TYPE_FIXED32, _F.TYPE_SFIXED32},
    {_F.TYPE_FIXED64, _F.TYPE_SFIXED64},
    {_F.TYPE_STRING, _F.TYPE_BYTES},
)
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")
_MAIN_FILE = "schema.proto"


# Imports Confluent's serializers never register as references (they treat them as built in).
_CONFLUENT_BUILTINS = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option java_package = "io.confluent.protobuf";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
option java_package = "io.confluent.protobuf.type";
message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
}
_BUILTIN_CACHE: dict[str, descriptor_pb2.FileDescriptorProto] = {}


def _builtin(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """Well-known imports (google/protobuf/..., confluent/...) need no reference."""
    if name in _BUILTIN_CACHE:
        return _BUILTIN_CACHE[name]
    if name in _CONFLUENT_BUILTINS:
        deps = [d for d in (_builtin("google/protobuf/descriptor.proto"),) if d is not None]
        proto = _compile(_CONFLUENT_BUILTINS[name], name, deps)
        _BUILTIN_CACHE[name] = proto
        return proto
    if name.startswith("google/protobuf/"):
        module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto")
        try:
            importlib.import_module(module + "_pb2")
        except ImportError:
            return None
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    _BUILTIN_CACHE[name] = proto
    return proto


def _decode_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    if not _BASE64.match(text) or "syntax" in text:
        return None
    try:
        raw = base64.b64decode(text, validate=False)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not proto.message_type and not proto.enum_type and not proto.package:
        return None
    return proto


def _compile(
    text: str, name: str, deps: Sequence[descriptor_pb2.FileDescriptorProto]
) -> descriptor_pb2.FileDescriptorProto:
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="tidelake-proto-") as tmp:
        root = Path(tmp)
        source = root / "src"
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text, encoding="utf-8")
        dep_set = descriptor_pb2.FileDescriptorSet(file=list(deps))
        (root / "deps.pb").write_bytes(dep_set.SerializeToString())
        args = [
            f"--proto_path={source}",
            f"--proto_path={include}",
            f"--descriptor_set_out={root / 'out.pb'}",
            name,
        ]
        if deps:
            args.insert(0, f"--descriptor_set_in={root / 'deps.pb'}")
        code, errors = run_protoc(args, tmp)
        if code != 0:
            message = errors.replace(str(source) + os.sep, "").strip() or "protoc failed"
            raise InvalidSchema(f"Invalid schema: {message[:2000]}")
        out = descriptor_pb2.FileDescriptorSet()
        out.ParseFromString((root / "out.pb").read_bytes())
    return out.file[-1]


def _comparable(proto: descriptor_pb2.FileDescriptorProto) -> bytes:
    """Descriptor bytes without what text cannot or need not carry (json names, source info)."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(proto)
    copy.ClearField("source_code_info")
    copy.ClearField("name")

    def strip(messages: Sequence[descriptor_pb2.DescriptorProto]) -> None:
        for msg in messages:
            for field in list(msg.field) + list(msg.extension):
                field.ClearField("json_name")
            strip(msg.nested_type)

    strip(copy.message_type)
    for field in copy.extension:
        field.ClearField("json_name")
    return bytes(copy.SerializeToString(deterministic=True))


class ProtobufSchema(ParsedSchema):
    """A compiled ``.proto``; its canonical text is rendered from the descriptor, so the same
    schema sent as text or as a base64 descriptor is stored once, under one id."""

    schema_type = "PROTOBUF"

    def __init__(
        self,
        text: str,
        proto: descriptor_pb2.FileDescriptorProto,
        deps: Sequence[descriptor_pb2.FileDescriptorProto] = (),
    ) -> None:
        self.text = text
        self.proto = proto
        self._deps = list(deps)
        self._canonical: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            rendered = render_proto(self.proto)
            try:  # keep the rendering only if it compiles back to the same wire schema
                again = _compile(rendered, self.proto.name or _MAIN_FILE, self._deps)
                ok = _comparable(again) == _comparable(self.proto)
            except InvalidSchema:
                ok = False
            self._canonical = rendered if ok else self.text.strip()
        return self._canonical

    def normalized(self) -> str:
        return self.canonical()

    def formatted(self, fmt: str | None) -> str | None:
        if fmt == "serialized":
            return base64.standard_b64encode(self.proto.SerializeToString()).decode("ascii")
        return None

    def compatibility_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"TYPE_MISMATCH: cannot compare PROTOBUF with {writer.schema_type}"]
        return _compare(self.proto, writer.proto, self._deps, writer._deps) + _compare_imports(
            self._deps, writer._deps
        )


class ProtobufFormat(SchemaFormat):
    schema_type = "PROTOBUF"

    def parse(self, text: str, references: Sequence[ResolvedReference]) -> ProtobufSchema:
        deps: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        for ref in references:
            if ref.schema_type != "PROTOBUF":
                raise InvalidSchema(
                    f"Invalid schema: reference {ref.name!r} is not a Protobuf schema"
                )
            deps[ref.name] = self._to_proto(ref.schema, ref.name, deps)
        proto = self._to_proto(text, _MAIN_FILE, deps)
        if not proto.message_type and not proto.enum_type:
            raise InvalidSchema("Invalid schema: a Protobuf schema needs a message or an enum")
        return ProtobufSchema(text, proto, self._with_builtins(list(proto.dependency), deps))

    def _to_proto(
        self, text: str, name: str, deps: dict[str, descriptor_pb2.FileDescriptorProto]
    ) -> descriptor_pb2.FileDescriptorProto:
        decoded = _decode_base64(text.strip())
        if decoded is None:
            wanted = re.findall(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"', text, re.MULTILINE)
            available = self._with_builtins(wanted, deps)
            return _compile(text, name if name.endswith(".proto") else _MAIN_FILE, available)
        decoded.name = name
        pool = descriptor_pool.DescriptorPool()
        try:
            for dep in self._with_builtins(list(decoded.dependency), deps):
                pool.Add(dep)
            pool.Add(decoded)
            pool.FindFileByName(name)
        except (TypeError, KeyError, ValueError) as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from None
        return decoded

    @staticmethod
    def _with_builtins(
        wanted: Sequence[str], deps: dict[str, descriptor_pb2.FileDescriptorProto]
    ) -> list[descriptor_pb2.FileDescriptorProto]:
        out = dict(deps)
        pending = list(wanted)
        while pending:
            name = pending.pop()
            if name in out:
                continue
            builtin = _builtin(name)
            if builtin is not None:
                out[name] = builtin
                pending += list(builtin.dependency)
        ordered: list[descriptor_pb2.FileDescriptorProto] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen or name not in out:
                return
            seen.add(name)
            for dep in out[name].dependency:
                visit(dep)
            ordered.append(out[name])

        for name in out:
            visit(name)
        return ordered


def _messages(
    proto: descriptor_pb2.FileDescriptorProto,
) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    def walk(
        prefix: str, msgs: Sequence[descriptor_pb2.DescriptorProto]
    ) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
        for msg in msgs:
            if msg.options.map_entry:
                continue
            full = f"{prefix}.{msg.name}" if prefix else msg.name
            yield full, msg
            yield from walk(full, msg.nested_type)

    yield from walk(proto.package, proto.message_type)


def _type_name(name: str, package: str) -> str:
    """Type names relative to the package, so that a package rename reports once."""
    name = name.lstrip(".")
    return name[len(package) + 1 :] if package and name.startswith(package + ".") else name


def _map_entries(
    files: Sequence[descriptor_pb2.FileDescriptorProto],
) -> dict[str, descriptor_pb2.DescriptorProto]:
    """Map entry messages (``map<K, V>`` fields) by fully qualified type name (``.pkg.Msg.MEntry``)."""
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, msgs: Sequence[descriptor_pb2.DescriptorProto]) -> None:
        for msg in msgs:
            full = f"{prefix}.{msg.name}"
            if msg.options.map_entry:
                out[full] = msg
            walk(full, msg.nested_type)

    for proto in files:
        walk(f".{proto.package}" if proto.package else "", proto.message_type)
    return out


class _Side:
    """One side of a comparison: its package and the map entries its fields may name."""

    __slots__ = ("package", "maps")

    def __init__(self, package: str, maps: dict[str, descriptor_pb2.DescriptorProto]) -> None:
        self.package = package
        self.maps = maps

    def map_entry(
        self, field: descriptor_pb2.FieldDescriptorProto
    ) -> descriptor_pb2.DescriptorProto | None:
        if field.type != _F.TYPE_MESSAGE or field.label != _F.LABEL_REPEATED:
            return None
        return self.maps.get(field.type_name)


def _compare(
    reader: descriptor_pb2.FileDescriptorProto,
    writer: descriptor_pb2.FileDescriptorProto,
    reader_deps: Sequence[descriptor_pb2.FileDescriptorProto] = (),
    writer_deps: Sequence[descriptor_pb2.FileDescriptorProto] = (),
) -> list[str]:
    errors: list[str] = []
    if reader.package != writer.package:
        errors.append(f"PACKAGE_CHANGED: from '{writer.package}' to '{reader.package}'")
    r_side = _Side(reader.package, _map_entries([*reader_deps, reader]))
    w_side = _Side(writer.package, _map_entries([*writer_deps, writer]))
    r_msgs = {_type_name(n, reader.package): m for n, m in _messages(reader)}
    for full, w_msg in _messages(writer):
        name = _type_name(full, writer.package)
        r_msg = r_msgs.get(name)
        if r_msg is None:
            errors.append(f"MESSAGE_REMOVED: message '{name}' is missing")
            continue
        errors += _compare_message(name, r_msg, w_msg, r_side, w_side)
    return errors


def _compare_imports(
    reader: Sequence[descriptor_pb2.FileDescriptorProto],
    writer: Sequence[descriptor_pb2.FileDescriptorProto],
) -> list[str]:
    """Messages of imported (referenced) files that both sides use, compared field by field."""

    def index(
        files: Sequence[descriptor_pb2.FileDescriptorProto],
    ) -> dict[str, descriptor_pb2.DescriptorProto]:
        out: dict[str, descriptor_pb2.DescriptorProto] = {}
        for proto in files:
            if not proto.name.startswith(("google/", "confluent/")):
                out.update(_messages(proto))
        return out

    r_msgs, w_msgs = index(reader), index(writer)
    r_side, w_side = _Side("", _map_entries(reader)), _Side("", _map_entries(writer))
    errors: list[str] = []
    for name, w_msg in w_msgs.items():
        r_msg = r_msgs.get(name)
        if r_msg is not None and r_msg is not w_msg:
            errors += _compare_message(name, r_msg, w_msg, r_side, w_side)
    return errors


_NAMED = (_F.TYPE_MESSAGE, _F.TYPE_ENUM, _F.TYPE_GROUP)
_ENUM_AS_VARINT = {_F.TYPE_ENUM, _F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64}
# Values that are length-delimited on the wire: a singular reader keeps the last of a repeated
# writer's values (messages merge), a repeated reader collects a singular writer's one value.
_LABEL_FREE = {_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE, _F.TYPE_GROUP}


def _compare_types(
    where: str,
    r: descriptor_pb2.FieldDescriptorProto,
    w: descriptor_pb2.FieldDescriptorProto,
    r_side: _Side,
    w_side: _Side,
    *,
    labels: bool = True,
) -> list[str]:
    """Why a field written as ``w`` cannot be read as ``r`` (Confluent's field rules).

    A map is a kind of its own: map against non-map is a kind change, map against map compares
    the key and the value types. A change between singular and repeated is compatible only for
    length-delimited values (string, bytes, messages); numbers, bools and enums may be packed.
    (Confluent sees no label on a proto3 field without ``optional``, so it lets such a numeric
    field become repeated; packed values break a singular reader, so that is refused here.)"""
    r_entry, w_entry = r_side.map_entry(r), w_side.map_entry(w)
    if (r_entry is None) != (w_entry is None):
        change = "from map" if w_entry is not None else "to map"
        return [f"FIELD_KIND_CHANGED: {where} changed {change}"]
    if r_entry is not None and w_entry is not None:
        errors: list[str] = []
        for number, part in ((1, "key"), (2, "value")):
            r_part = next((f for f in r_entry.field if f.number == number), None)
            w_part = next((f for f in w_entry.field if f.number == number), None)
            if r_part is not None and w_part is not None:
                errors += _compare_types(
                    f"{where} map {part}", r_part, w_part, r_side, w_side, labels=False
                )
        return errors
    if r.type in _NAMED or w.type in _NAMED:
        if r.type != w.type:
            if not {r.type, w.type} <= _ENUM_AS_VARINT:  # an enum is a varint on the wire
                return [f"FIELD_KIND_CHANGED: {where}"]
        elif _type_name(r.type_name, r_side.package) != _type_name(w.type_name, w_side.package):
            return [f"FIELD_NAMED_TYPE_CHANGED: {where} from '{w.type_name}' to '{r.type_name}'"]
    elif r.type != w.type and not any(r.type in g and w.type in g for g in _WIRE_GROUPS):
        return [
            f"FIELD_SCALAR_KIND_CHANGED: {where} from {_F.Type.Name(w.type)} to {_F.Type.Name(r.type)}"
        ]
    repeated_changed = (r.label == _F.LABEL_REPEATED) != (w.label == _F.LABEL_REPEATED)
    if labels and repeated_changed and not {r.type, w.type} <= _LABEL_FREE:
        return [f"FIELD_NUMERIC_LABEL_CHANGED: {where} repeated changed"]
    return []


def _compare_message(
    name: str,
    r_msg: descriptor_pb2.DescriptorProto,
    w_msg: descriptor_pb2.DescriptorProto,
    r_side: _Side,
    w_side: _Side,
) -> list[str]:
    errors: list[str] = []
    r_fields = {f.number: f for f in r_msg.field}
    w_fields = {f.number: f for f in w_msg.field}

    def oneof(
        msg: descriptor_pb2.DescriptorProto, field: descriptor_pb2.FieldDescriptorProto
    ) -> str | None:
        if not field.HasField("oneof_index") or field.proto3_optional:
            return None
        return str(msg.oneof_decl[field.oneof_index].name)

    for number, w in w_fields.items():
        r = r_fields.get(number)
        where = f"{name}.{w.name} (#{number})"
        if r is None:
            if w.label == _F.LABEL_REQUIRED:
                errors.append(f"REQUIRED_FIELD_REMOVED: {where}")
            continue
        errors += _compare_types(where, r, w, r_side, w_side)
        w_oneof, r_oneof = oneof(w_msg, w), oneof(r_msg, r)
        if w_oneof is None and r_oneof is not None:
            w_oneof_names = {d.name for d in w_msg.oneof_decl}
            if r_oneof in w_oneof_names:
                errors.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {where} into '{r_oneof}'")
    for number, r in r_fields.items():
        w_field = w_fields.get(number)
        if r.label == _F.LABEL_REQUIRED and (w_field is None or w_field.label != _F.LABEL_REQUIRED):
            errors.append(f"REQUIRED_FIELD_ADDED: {name}.{r.name} (#{number})")
    # A oneof that survives must keep every member; dissolving or dropping it whole is fine.
    r_members: dict[str, set[int]] = {}
    for r in r_msg.field:
        group = oneof(r_msg, r)
        if group is not None:
            r_members.setdefault(group, set()).add(r.number)
    for w in w_msg.field:
        group = oneof(w_msg, w)
        if group is not None and group in r_members and w.number not in r_members[group]:
            errors.append(
                f"ONEOF_FIELD_REMOVED: {name}.{w.name} (#{w.number}) left oneof '{group}'"
            )
    moved: dict[str, int] = {}
    for number, r in r_fields.items():
        r_oneof = oneof(r_msg, r)
        w = w_fields.get(number)
        if r_oneof is not None and w is not None and oneof(w_msg, w) is None:
            moved[r_oneof] = moved.get(r_oneof, 0) + 1
    for group, count in moved.items():
        if count > 1:
            errors.append(
                f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {count} fields of {name} into '{group}'"
            )
    return errors
