"""Avro: parsing with fastavro, canonical strings, and Avro schema-resolution compatibility."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from schema_registry.errors import InvalidSchema
from schema_registry.formats.base import ParsedSchema, ResolvedReference, SchemaFormat

__all__ = ["AvroFormat", "AvroSchema"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_COMPLEX = _NAMED | {"array", "map"}
# writer type -> reader types it may be promoted to (Avro specification, schema resolution).
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _parse(text: str, named: dict[str, Any]) -> Any:
    try:
        raw = json.loads(text)
    except ValueError:
        # Confluent accepts a bare primitive name such as ``string``.
        if text.strip() in _PRIMITIVES:
            raw = text.strip()
        else:
            raise InvalidSchema(f"Invalid schema: not valid JSON: {text[:200]!r}") from None
    try:
        parsed = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False, _force=True)
    except (
        SchemaParseException,
        UnknownType,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
    ) as exc:
        raise InvalidSchema(f"Invalid schema: {type(exc).__name__}: {exc}") from None
    return raw, parsed


class AvroSchema(ParsedSchema):
    schema_type = "AVRO"

    def __init__(self, raw: Any, parsed: Any, named: dict[str, Any]) -> None:
        self.raw = raw
        self.parsed = parsed
        self.named = named

    def canonical(self) -> str:
        return _compact(_rewrite(self.raw, "", qualify=False))

    def normalized(self) -> str:
        return _compact(_rewrite(self.raw, "", qualify=True))

    def compatibility_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"TYPE_MISMATCH: cannot compare AVRO with {writer.schema_type}"]
        return _Checker(self.named, writer.named).check(self.parsed, writer.parsed, "")


class AvroFormat(SchemaFormat):
    schema_type = "AVRO"

    def parse(self, text: str, references: Sequence[ResolvedReference]) -> AvroSchema:
        named: dict[str, Any] = {}
        for ref in references:
            if ref.schema_type != "AVRO":
                raise InvalidSchema(f"Invalid schema: reference {ref.name!r} is not an Avro schema")
            _parse(ref.schema, named)
        raw, parsed = _parse(text, named)
        _check_records_have_fields(raw)
        _check_structure(parsed, set())
        _check_defaults(parsed, named, "", set())
        return AvroSchema(raw, parsed, named)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _valid_fullname(name: str) -> bool:
    return all(_NAME.match(part) for part in name.split("."))


def _union_key(branch: Any) -> str:
    if isinstance(branch, str):
        return branch
    if isinstance(branch, dict):
        kind = branch.get("type")
        if kind in _NAMED:
            return str(branch.get("name"))
        if isinstance(kind, str) and kind in _PRIMITIVES:
            return kind  # a primitive with properties (logical types) is still that primitive
        return str(kind)
    return "union"


def _check_records_have_fields(raw: Any) -> None:
    if isinstance(raw, list):
        for item in raw:
            _check_records_have_fields(item)
    elif isinstance(raw, dict):
        if raw.get("type") in ("record", "error") and not isinstance(raw.get("fields"), list):
            raise InvalidSchema(f"Invalid schema: record {raw.get('name')!r} has no fields")
        for value in raw.values():
            if isinstance(value, dict | list):
                _check_records_have_fields(value)


def _check_structure(schema: Any, seen: set[str]) -> None:
    """What the Java Avro parser (Confluent's) rejects and fastavro lets through: invalid
    names, records without fields, duplicate field names, ambiguous or nested unions."""
    if isinstance(schema, list):
        keys = [_union_key(b) for b in schema]
        if "union" in keys:
            raise InvalidSchema("Invalid schema: unions may not immediately contain other unions")
        duplicates = {k for k in keys if keys.count(k) > 1}
        if duplicates:
            raise InvalidSchema(f"Invalid schema: duplicate in union: {sorted(duplicates)}")
        for branch in schema:
            _check_structure(branch, seen)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        _check_structure(kind, seen)
        return
    if kind in _NAMED:
        name = str(schema.get("name", ""))
        if not _valid_fullname(name):
            raise InvalidSchema(f"Invalid schema: illegal name {name!r}")
        if name in seen:
            return
        seen.add(name)
    if kind == "enum":
        for symbol in schema.get("symbols", ()):
            if not isinstance(symbol, str) or not _NAME.match(symbol):
                raise InvalidSchema(f"Invalid schema: illegal enum symbol {symbol!r}")
    elif kind in ("record", "error"):
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise InvalidSchema(f"Invalid schema: record {schema.get('name')!r} has no fields")
        names: set[str] = set()
        for field in fields:
            fname = str(field.get("name", ""))
            if not _NAME.match(fname):
                raise InvalidSchema(f"Invalid schema: illegal field name {fname!r}")
            if fname in names:
                raise InvalidSchema(f"Invalid schema: duplicate field {fname!r}")
            names.add(fname)
            _check_structure(field.get("type"), seen)
    elif kind == "array":
        _check_structure(schema.get("items"), seen)
    elif kind == "map":
        _check_structure(schema.get("values"), seen)


def _default_fits(value: Any, schema: Any, named: dict[str, Any]) -> bool:
    """Does a JSON default value fit an Avro type (unions: their first branch)?"""
    while isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return bool(schema) and _default_fits(value, schema[0], named)
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, dict | list):
        return _default_fits(value, kind, named)
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("string", "bytes", "fixed"):
        return isinstance(value, str)
    if kind == "enum":
        return isinstance(value, str) and value in schema.get("symbols", ())
    if kind == "array":
        return isinstance(value, list) and all(
            _default_fits(v, schema["items"], named) for v in value
        )
    if kind == "map":
        return isinstance(value, dict) and all(
            _default_fits(v, schema["values"], named) for v in value.values()
        )
    if kind in ("record", "error"):
        if not isinstance(value, dict):
            return False
        return all(
            _default_fits(value[f["name"]], f["type"], named)
            if f["name"] in value
            else "default" in f
            for f in schema.get("fields", ())
        )
    return True


def _check_defaults(schema: Any, named: dict[str, Any], path: str, seen: set[str]) -> None:
    """Reject field defaults that do not match their type (Confluent validates them too)."""
    if isinstance(schema, list):
        for branch in schema:
            _check_defaults(branch, named, path, seen)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        _check_defaults(kind, named, path, seen)
    elif kind == "array":
        _check_defaults(schema.get("items"), named, path, seen)
    elif kind == "map":
        _check_defaults(schema.get("values"), named, path, seen)
    elif kind in ("record", "error"):
        name = str(schema.get("name"))
        if name in seen:
            return
        seen.add(name)
        for field in schema.get("fields", ()):
            where = f"{path}.{field['name']}" if path else f"{name}.{field['name']}"
            if "default" in field and not _default_fits(field["default"], field["type"], named):
                raise InvalidSchema(
                    f"Invalid schema: invalid default for field {where}: {field['default']!r}"
                )
            _check_defaults(field["type"], named, where, seen)


def _fullname(name: str, namespace: str) -> tuple[str, str]:
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    full = f"{namespace}.{name}" if namespace else name
    return full, namespace


_KEY_ORDER = (
    "type",
    "name",
    "namespace",
    "doc",
    "fields",
    "symbols",
    "items",
    "values",
    "size",
    "default",
    "order",
    "aliases",
)
_FIELD_KEY_ORDER = ("name", "type", "doc", "default", "order", "aliases")


def _ordered(node: dict[str, Any], order: Sequence[str], sort_rest: bool) -> dict[str, Any]:
    rank = {k: i for i, k in enumerate(order)}
    keys = sorted(node, key=lambda k: (rank.get(k, len(rank)), k if sort_rest else ""))
    return {k: node[k] for k in keys}


def _rewrite(node: Any, namespace: str, qualify: bool) -> Any:
    """Re-serialise a schema the way Avro's Java ``Schema.toString()`` does (fixed key order,
    primitive wrappers collapsed, names relative to the enclosing namespace), so that
    schemas differing only in layout share one canonical string. ``qualify=True`` is the
    normalised form: every name fully qualified, no ``namespace`` keys, extra keys sorted."""
    if isinstance(node, list):
        return [_rewrite(n, namespace, qualify) for n in node]
    if isinstance(node, str):
        if node in _PRIMITIVES or node in _COMPLEX:
            return node
        full = node if "." in node or not namespace else f"{namespace}.{node}"
        if qualify:
            return full
        space, _, short = full.rpartition(".")
        return short if space == namespace else full
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if isinstance(kind, str) and kind in _PRIMITIVES and len(node) == 1:
        return kind
    out: dict[str, Any] = {}
    ns = namespace
    if kind in _NAMED and "name" in node:
        explicit = node.get("namespace")
        full, ns = _fullname(str(node["name"]), namespace if explicit is None else str(explicit))
        out["type"] = kind
        if qualify:
            out["name"] = full
        else:
            out["name"] = full.rpartition(".")[2]
            if ns != namespace:
                out["namespace"] = ns
    for key, value in node.items():
        if kind in _NAMED and key in ("namespace", "name", "type"):
            continue
        if key in ("type", "items", "values"):
            out[key] = _rewrite(value, ns, qualify)
        elif key == "fields" and isinstance(value, list):
            out[key] = [
                _ordered(
                    {k: (_rewrite(v, ns, qualify) if k == "type" else v) for k, v in f.items()},
                    _FIELD_KEY_ORDER,
                    qualify,
                )
                if isinstance(f, dict)
                else f
                for f in value
            ]
        elif key == "aliases" and qualify and isinstance(value, list):
            out[key] = [_fullname(str(a), ns)[0] for a in value]
        else:
            out[key] = value
    return _ordered(out, _KEY_ORDER, qualify)


class _Checker:
    """Can a reader schema read everything a writer schema writes (Avro 1.11 resolution rules)."""

    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.in_progress: set[tuple[str, str]] = set()

    @staticmethod
    def _resolve(node: Any, named: dict[str, Any]) -> Any:
        while isinstance(node, str) and node not in _PRIMITIVES and node in named:
            node = named[node]
        if isinstance(node, dict) and isinstance(node.get("type"), str | dict | list):
            inner = node["type"]
            if isinstance(inner, str) and inner in _PRIMITIVES:
                return inner  # logical types and properties resolve as their base type
            if not isinstance(inner, str) or inner not in _NAMED | {"array", "map"}:
                return _Checker._resolve(inner, named)
        return node

    @staticmethod
    def _kind(node: Any) -> str:
        if isinstance(node, list):
            return "union"
        if isinstance(node, str):
            return node
        kind = node.get("type")
        return "record" if kind == "error" else str(kind)

    @staticmethod
    def _short(name: str) -> str:
        return name.rsplit(".", 1)[-1]

    def _names_match(self, reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        rname, wname = str(reader.get("name", "")), str(writer.get("name", ""))
        if self._short(rname) == self._short(wname):
            return True
        aliases = {self._short(str(a)) for a in reader.get("aliases", ())} | set(
            reader.get("aliases", ())
        )
        return wname in aliases or self._short(wname) in aliases

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        rkind, wkind = self._kind(reader), self._kind(writer)
        if wkind == "union":
            errors: list[str] = []
            for i, branch in enumerate(writer):
                errors += self.check(reader, branch, f"{path}/{i}")
            return errors
        if rkind == "union":
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [
                f"MISSING_UNION_BRANCH at '{path or '/'}': reader union lacks writer type {wkind}"
            ]
        if rkind != wkind:
            if rkind in _PROMOTIONS.get(wkind, ()):
                return []
            return [
                f"TYPE_MISMATCH at '{path or '/'}': reader type {rkind} not compatible with writer type {wkind}"
            ]
        if rkind in _PRIMITIVES:
            return []
        if rkind == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if rkind == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if not self._names_match(reader, writer):
            return [
                f"NAME_MISMATCH at '{path or '/'}': expected {writer.get('name')}, found {reader.get('name')}"
            ]
        if rkind == "fixed":
            if reader.get("size") != writer.get("size"):
                return [
                    f"FIXED_SIZE_MISMATCH at '{path}/size': expected {writer.get('size')}, found {reader.get('size')}"
                ]
            return []
        if rkind == "enum":
            missing = [s for s in writer.get("symbols", ()) if s not in reader.get("symbols", ())]
            if missing and reader.get("default") is None:
                return [f"MISSING_ENUM_SYMBOLS at '{path}/symbols': reader lacks {missing}"]
            return []
        return self._check_record(reader, writer, path)

    def _check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        key = (str(reader.get("name")), str(writer.get("name")))
        if key in self.in_progress:
            return []  # recursive type: assume compatible while it is being checked
        self.in_progress.add(key)
        try:
            writer_fields = {f["name"]: f for f in writer.get("fields", ())}
            errors: list[str] = []
            for i, field in enumerate(reader.get("fields", ())):
                found = writer_fields.get(field["name"])
                if found is None:
                    for alias in field.get("aliases", ()):
                        if alias in writer_fields:
                            found = writer_fields[alias]
                            break
                if found is None:
                    if "default" not in field:
                        errors.append(
                            f"READER_FIELD_MISSING_DEFAULT_VALUE at '{path}/fields/{i}': "
                            f"field '{field['name']}' has no default value and is missing in the writer schema"
                        )
                    continue
                errors += self.check(field["type"], found["type"], f"{path}/fields/{i}/type")
            return errors
        finally:
            self.in_progress.discard(key)
