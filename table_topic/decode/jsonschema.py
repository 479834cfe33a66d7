"""JSON Schema payloads: UTF-8 JSON, typed by the schema.

Type mapping: object with properties -> struct; array with items -> list;
object with only additionalProperties -> map<string, V>; integer -> int64;
number -> float64; boolean; string -> string (format date-time ->
timestamp[us, UTC], date -> date32); local ``$ref`` (#/definitions, #/$defs)
followed; anything else (oneOf, untyped, external refs) -> string holding the
JSON text. A ``["null", T]`` type list is a nullable T.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import pyarrow as pa

from table_topic.decode.base import PayloadDecoder
from table_topic.errors import InvalidDataError, TableTopicError

__all__ = ["JsonSchemaDecoder", "json_schema_to_arrow"]

_JSON_TEXT = "__json_text__"


def _resolve(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return {"type": _JSON_TEXT}
        node = root
        for part in ref[2:].split("/"):
            node = (
                node.get(part.replace("~1", "/").replace("~0", "~"), {})
                if isinstance(node, dict)
                else {}
            )
        schema = node
        seen += 1
        if seen > 32:
            raise TableTopicError("JSON Schema $ref loop")
    return schema


def json_schema_to_arrow(schema: Any, root: Any | None = None, depth: int = 0) -> pa.DataType:
    root = schema if root is None else root
    if depth > 32:
        raise TableTopicError("JSON Schema nests too deeply (recursive?)")
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict):
        return pa.string()
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else _JSON_TEXT
    if kind is None and "properties" in schema:
        kind = "object"
    if kind == "object":
        props = schema.get("properties")
        if props:
            return pa.struct(
                [
                    pa.field(name, json_schema_to_arrow(sub, root, depth + 1))
                    for name, sub in props.items()
                ]
            )
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return pa.map_(pa.string(), json_schema_to_arrow(extra, root, depth + 1))
        return pa.string()
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict):
            return pa.list_(json_schema_to_arrow(items, root, depth + 1))
        return pa.string()
    if kind == "integer":
        return pa.int64()
    if kind == "number":
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return pa.timestamp("us", tz="UTC")
        if fmt == "date":
            return pa.date32()
        return pa.string()
    return pa.string()


def _coerce(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise InvalidDataError(f"expected a JSON object, got {type(value).__name__}")
        return {
            t.field(i).name: _coerce(value.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_list(t):
        if not isinstance(value, list):
            raise InvalidDataError(f"expected a JSON array, got {type(value).__name__}")
        return [_coerce(v, t.value_type) for v in value]
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise InvalidDataError(f"expected a JSON object, got {type(value).__name__}")
        return [(k, _coerce(v, t.item_type)) for k, v in value.items()]
    if pa.types.is_timestamp(t):
        if not isinstance(value, str):
            raise InvalidDataError("expected a date-time string")
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidDataError(f"bad date-time {value!r}") from exc
    if pa.types.is_date(t):
        try:
            return date.fromisoformat(value)
        except (TypeError, ValueError) as exc:
            raise InvalidDataError(f"bad date {value!r}") from exc
    if pa.types.is_string(t) and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"))
    if pa.types.is_integer(t) and (isinstance(value, bool) or not isinstance(value, int)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise InvalidDataError(f"expected an integer, got {value!r}")
    if pa.types.is_floating(t) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidDataError(f"expected a number, got {value!r}")
    if pa.types.is_boolean(t) and not isinstance(value, bool):
        raise InvalidDataError(f"expected a boolean, got {value!r}")
    return value


class JsonSchemaDecoder(PayloadDecoder):
    schema_type = "JSON"

    def __init__(self, schema_id: int, text: str) -> None:
        self.schema_id = schema_id
        try:
            self.schema_json = json.loads(text)
        except ValueError as exc:
            raise TableTopicError(f"cannot parse JSON Schema {schema_id}: {exc}") from exc
        self.arrow_type = json_schema_to_arrow(self.schema_json)

    def decode(self, body: memoryview | bytes) -> Any:
        try:
            value = json.loads(bytes(body))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidDataError(f"payload is not JSON: {exc}") from exc
        return _coerce(value, self.arrow_type)
