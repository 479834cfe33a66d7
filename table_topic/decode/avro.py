"""Avro payloads: fastavro per record, and Avro schemas as Arrow types.

Type mapping (Avro -> Arrow -> Iceberg): record -> struct; array -> list; map ->
map<string, V>; enum -> string; fixed(n) -> fixed_size_binary(n) -> fixed(n);
bytes -> binary; int -> int32; long -> int64; float; double; boolean; string.
Logical types: decimal(p, s) -> decimal128(p, s); date -> date32;
time-millis/micros -> time64[us]; timestamp-millis/micros -> timestamp[us, UTC]
(timestamptz); local-timestamp-millis/micros -> timestamp[us]; uuid -> string.
``[null, T]`` unions are a nullable T; other unions become a struct with one
optional field per branch (named after the branch type). Every field is
nullable in Arrow (the table's columns are optional), so a field dropped or
made optional later never needs a breaking change.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import fastavro
import pyarrow as pa

from table_topic.decode.base import PayloadDecoder
from table_topic.errors import InvalidDataError, TableTopicError

__all__ = ["AvroDecoder", "avro_to_arrow"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _full_name(schema: Mapping[str, Any], namespace: str | None) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _branch_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema.rsplit(".", 1)[-1]
    if isinstance(schema, dict):
        if "name" in schema:
            return str(schema["name"]).rsplit(".", 1)[-1]
        return str(schema.get("logicalType") or schema["type"])
    return "union"


def avro_to_arrow(
    schema: Any, named: dict[str, Any] | None = None, namespace: str | None = None
) -> pa.DataType:
    """The Arrow type of an Avro schema (parsed JSON). ``named`` holds named types seen so far."""
    named = {} if named is None else named
    return _convert(schema, named, namespace, ())


def _convert(
    schema: Any, named: dict[str, Any], ns: str | None, stack: tuple[str, ...]
) -> pa.DataType:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        full = schema if "." in schema or not ns else f"{ns}.{schema}"
        target = named.get(full) or named.get(schema)
        if target is None:
            raise TableTopicError(f"Avro schema refers to unknown type {schema!r}")
        if full in stack or schema in stack:
            raise TableTopicError(f"recursive Avro type {schema!r} cannot become a table column")
        return _convert(target, named, ns, stack)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _convert(branches[0], named, ns, stack)
        if not branches:
            return pa.null()
        return pa.struct(
            [pa.field(_branch_name(b), _convert(b, named, ns, stack)) for b in branches]
        )
    if not isinstance(schema, dict):
        raise TableTopicError(f"cannot read Avro schema {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical in ("time-millis", "time-micros"):
        return pa.time64("us")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("us", tz="UTC")
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("us")
    if logical == "uuid":
        return pa.string()
    if kind == "record" or kind == "error":
        full = _full_name(schema, ns)
        named[full] = schema
        inner_ns = full.rsplit(".", 1)[0] if "." in full else None
        return pa.struct(
            [
                pa.field(f["name"], _convert(f["type"], named, inner_ns, (*stack, full)))
                for f in schema["fields"]
            ]
        )
    if kind == "enum":
        named[_full_name(schema, ns)] = schema
        return pa.string()
    if kind == "fixed":
        named[_full_name(schema, ns)] = schema
        return pa.binary(int(schema["size"]))
    if kind == "array":
        return pa.list_(_convert(schema["items"], named, ns, stack))
    if kind == "map":
        return pa.map_(pa.string(), _convert(schema["values"], named, ns, stack))
    if kind in _PRIMITIVES or isinstance(kind, (dict, list)):
        return _convert(kind, named, ns, stack)
    if isinstance(kind, str):
        return _convert(kind, named, ns, stack)
    raise TableTopicError(f"unsupported Avro schema {schema!r}")


def _needs_fixup(t: pa.DataType) -> bool:
    """Values fastavro returns that pyarrow will not take as they are."""
    if pa.types.is_string(t) or pa.types.is_time(t):
        return True  # uuid.UUID objects; time objects are fine but cheap to check
    if pa.types.is_struct(t):
        return any(_needs_fixup(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return _needs_fixup(t.value_type)
    if pa.types.is_map(t):
        return _needs_fixup(t.item_type)
    return False


def _has_general_union(schema: Any, named: dict[str, Any], seen: set[str]) -> bool:
    if isinstance(schema, str):
        target = named.get(schema)
        if target is None or schema in seen:
            return False
        return _has_general_union(target, named, seen | {schema})
    if isinstance(schema, list):
        if len([b for b in schema if b != "null"]) > 1:
            return True
        return any(_has_general_union(b, named, seen) for b in schema)
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error"):
            return any(_has_general_union(f["type"], named, seen) for f in schema["fields"])
        if kind == "array":
            return _has_general_union(schema["items"], named, seen)
        if kind == "map":
            return _has_general_union(schema["values"], named, seen)
        if isinstance(kind, (dict, list)):
            return _has_general_union(kind, named, seen)
    return False


_PY_BRANCH: dict[type, tuple[str, ...]] = {
    bool: ("boolean",),
    int: ("int", "long"),
    float: ("float", "double"),
    str: ("string", "enum"),
    bytes: ("bytes", "fixed"),
    list: ("array",),
    dict: ("map", "record"),
}


def _kind_of(schema: Any, named: dict[str, Any]) -> str:
    if isinstance(schema, str):
        target = named.get(schema)
        return _kind_of(target, named) if target is not None else schema
    if isinstance(schema, dict):
        kind = schema.get("type")
        return kind if isinstance(kind, str) else _kind_of(kind, named)
    return "union"


def _shape(schema: Any, value: Any, named: dict[str, Any]) -> Any:
    """Re-shape a fastavro value so general unions become {branch: value} structs."""
    if value is None:
        return None
    if isinstance(schema, str):
        target = named.get(schema)
        return _shape(target, value, named) if target is not None else _fix(value)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _shape(branches[0], value, named)
        out: dict[str, Any] = {_branch_name(b): None for b in branches}
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            name, inner = value
            for b in branches:
                full = b if isinstance(b, str) else b.get("name", "") if isinstance(b, dict) else ""
                if name == full or name.rsplit(".", 1)[-1] == _branch_name(b):
                    out[_branch_name(b)] = _shape(b, inner, named)
                    return out
        wanted = _PY_BRANCH.get(type(value), ())
        for b in branches:
            if _kind_of(b, named) in wanted:
                out[_branch_name(b)] = _shape(b, value, named)
                return out
        return out
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error") and isinstance(value, dict):
            return {
                f["name"]: _shape(f["type"], value.get(f["name"]), named) for f in schema["fields"]
            }
        if kind == "array":
            return [_shape(schema["items"], v, named) for v in value]
        if kind == "map":
            return {k: _shape(schema["values"], v, named) for k, v in value.items()}
        if isinstance(kind, (dict, list)):
            return _shape(kind, value, named)
    return _fix(value)


def _fix(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _fix(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fix(v) for v in value]
    return value


class AvroDecoder(PayloadDecoder):
    schema_type = "AVRO"

    def __init__(self, schema_id: int, text: str, references: list[str] | None = None) -> None:
        """``references``: texts of referenced schemas, dependencies first."""
        self.schema_id = schema_id
        named: dict[str, Any] = {}
        fa_named: dict[str, Any] = {}
        try:
            for ref in references or []:
                ref_json = json.loads(ref)
                avro_to_arrow(ref_json, named)
                fastavro.parse_schema(ref_json, named_schemas=fa_named)
            # the referenced schemas' named types, for the bulk decoder's expansion
            self.reference_types: dict[str, Any] = dict(fa_named)
            self.schema_json = json.loads(text)
            self.arrow_type = avro_to_arrow(self.schema_json, named)
            self._parsed = fastavro.parse_schema(self.schema_json, named_schemas=fa_named)
            self._named = named
            self._unions = _has_general_union(self.schema_json, named, set())
        except (ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException) as exc:
            raise TableTopicError(f"cannot use Avro schema {schema_id}: {exc}") from exc
        self._fixup = _needs_fixup(self.arrow_type)

    @property
    def is_flat_record(self) -> bool:
        """A record of primitive fields: eligible for the bulk column decoder."""
        t = self.arrow_type
        return pa.types.is_struct(t) and all(
            not pa.types.is_nested(t.field(i).type) for i in range(t.num_fields)
        )

    def decode(self, body: memoryview | bytes) -> Any:
        stream = io.BytesIO(body)
        try:
            value = fastavro.schemaless_reader(
                stream,
                self._parsed,
                None,
                return_record_name=self._unions,
                return_record_name_override=self._unions,
            )
        except Exception as exc:  # fastavro raises many kinds on bad bytes
            raise InvalidDataError(
                f"cannot decode Avro with schema {self.schema_id}: {exc!r}"
            ) from exc
        if stream.tell() != len(body):
            raise InvalidDataError(
                f"Avro payload has {len(body) - stream.tell()} trailing bytes for schema {self.schema_id}"
            )
        if self._unions:
            return _shape(self.schema_json, value, self._named)
        return _fix(value) if self._fixup else value

    def decode_column(self, bodies: list[memoryview | bytes]) -> pa.Array | None:
        from table_topic.decode.avro_bulk import decode_bulk

        return decode_bulk(self, bodies)


def millis_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
