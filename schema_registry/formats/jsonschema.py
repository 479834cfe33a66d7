"""JSON Schema: validation with ``jsonschema``, and reader-accepts-what-writer-accepts compatibility.

Compatibility is decided structurally: a reader schema can read a writer's data
when every instance valid under the writer is valid under the reader. Open
content models (``additionalProperties`` absent or true) mean the writer may
have written any property; closed ones (``false``) mean it wrote none beyond
those listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from schema_registry.errors import InvalidSchema
from schema_registry.formats.base import ParsedSchema, ResolvedReference, SchemaFormat

__all__ = ["JsonSchemaFormat", "JsonSchema"]

_NUMERIC = frozenset({"number", "integer"})
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_APPLIES = {
    "minimum": _NUMERIC,
    "exclusiveMinimum": _NUMERIC,
    "maximum": _NUMERIC,
    "exclusiveMaximum": _NUMERIC,
    "multipleOf": _NUMERIC,
    "minLength": {"string"},
    "maxLength": {"string"},
    "pattern": {"string"},
    "minItems": {"array"},
    "maxItems": {"array"},
    "minProperties": {"object"},
    "maxProperties": {"object"},
}
_COMBINERS = ("anyOf", "oneOf", "allOf")


def _load(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema: not valid JSON: {exc}") from None
    if not isinstance(value, dict | bool):
        raise InvalidSchema("Invalid schema: a JSON Schema must be an object or a boolean")
    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        raise InvalidSchema(f"Invalid schema: {exc.message}") from None
    return value


class JsonSchema(ParsedSchema):
    schema_type = "JSON"

    def __init__(self, value: Any, documents: dict[str, Any]) -> None:
        self.value = value
        self.documents = documents

    def canonical(self) -> str:
        return json.dumps(self.value, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self.value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def compatibility_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"TYPE_CHANGED: cannot compare JSON with {writer.schema_type}"]
        checker = _Checker(self.documents, writer.documents)
        return checker.check(_Node(self.value, self.value), _Node(writer.value, writer.value), "#")


class JsonSchemaFormat(SchemaFormat):
    schema_type = "JSON"

    def parse(self, text: str, references: Sequence[ResolvedReference]) -> JsonSchema:
        documents: dict[str, Any] = {}
        for ref in references:
            if ref.schema_type != "JSON":
                raise InvalidSchema(f"Invalid schema: reference {ref.name!r} is not a JSON schema")
            documents[ref.name] = _load(ref.schema)
        value = _load(text)
        if isinstance(value, dict) and isinstance(value.get("$id"), str):
            documents.setdefault(value["$id"], value)
        return JsonSchema(value, documents)


class _Node:
    __slots__ = ("schema", "root")

    def __init__(self, schema: Any, root: Any) -> None:
        self.schema = schema
        self.root = root


def _pointer(doc: Any, fragment: str) -> Any:
    node = doc
    for part in fragment.lstrip("/").split("/") if fragment.strip("/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(fragment)
    return node


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Checker:
    def __init__(self, reader_docs: dict[str, Any], writer_docs: dict[str, Any]) -> None:
        self.docs = (reader_docs, writer_docs)
        self.in_progress: set[tuple[int, int]] = set()

    def _deref(self, node: _Node, side: int) -> _Node:
        for _ in range(32):
            schema = node.schema
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return node
            ref: str = schema["$ref"]
            base, _, fragment = ref.partition("#")
            root = node.root if not base else self.docs[side].get(base)
            if root is None:
                return _Node(True, node.root)  # unresolvable: treat as "anything"
            try:
                target = _pointer(root, fragment)
            except (KeyError, ValueError, IndexError):
                return _Node(True, node.root)
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            if siblings and isinstance(target, dict):
                target = {**target, **siblings}
            node = _Node(target, root)
        return node

    def check(self, reader: _Node, writer: _Node, path: str) -> list[str]:
        reader, writer = self._deref(reader, 0), self._deref(writer, 1)
        r, w = reader.schema, writer.schema
        if w is False or r is True or r == {}:
            return []
        if r is False:
            return [f"TYPE_NARROWED at '{path}': the reader accepts nothing"]
        if w is True:
            w = {}
        key = (id(r), id(w))
        if key in self.in_progress:
            return []
        self.in_progress.add(key)
        try:
            return self._check_dicts(reader, writer, r, w, path)
        finally:
            self.in_progress.discard(key)

    def _sub(self, schema: Any, root: Any) -> _Node:
        return _Node(schema, root)

    def _check_dicts(
        self, reader: _Node, writer: _Node, r: dict[str, Any], w: dict[str, Any], path: str
    ) -> list[str]:
        for combiner in ("anyOf", "oneOf"):
            if isinstance(w.get(combiner), list):
                rest = {k: v for k, v in w.items() if k != combiner}
                errors: list[str] = []
                for i, branch in enumerate(w[combiner]):
                    merged = {**rest, **branch} if isinstance(branch, dict) else branch
                    errors += self.check(
                        reader, _Node(merged, writer.root), f"{path}/{combiner}/{i}"
                    )
                return errors
        for combiner in ("anyOf", "oneOf"):
            if isinstance(r.get(combiner), list):
                rest = {k: v for k, v in r.items() if k != combiner}
                for branch in r[combiner]:
                    merged = {**rest, **branch} if isinstance(branch, dict) else branch
                    if not self.check(_Node(merged, reader.root), writer, path):
                        return []
                return [
                    f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at '{path}/{combiner}': "
                    "no reader subschema accepts the writer's data"
                ]
        if isinstance(r.get("allOf"), list):
            errors = []
            rest = {k: v for k, v in r.items() if k != "allOf"}
            for i, branch in enumerate(r["allOf"]):
                errors += self.check(_Node(branch, reader.root), writer, f"{path}/allOf/{i}")
            return errors + self.check(_Node(rest, reader.root), writer, path)
        if isinstance(w.get("allOf"), list):
            merged_w = {k: v for k, v in w.items() if k != "allOf"}
            for branch in w["allOf"]:
                branch = self._deref(_Node(branch, writer.root), 1).schema
                if isinstance(branch, dict):
                    for k, v in branch.items():
                        merged_w.setdefault(k, v)
            return self.check(reader, _Node(merged_w, writer.root), path)
        return self._check_plain(reader, writer, r, w, path)

    def _check_plain(
        self, reader: _Node, writer: _Node, r: dict[str, Any], w: dict[str, Any], path: str
    ) -> list[str]:
        errors: list[str] = []
        rtypes, wtypes = _types(r), _types(w)
        if rtypes is not None:
            if wtypes is None:
                if not ("enum" in w or "const" in w):
                    errors.append(
                        f"TYPE_NARROWED at '{path}': the reader requires type {sorted(rtypes)}"
                    )
            else:
                for wt in sorted(wtypes):
                    if wt not in rtypes and not (wt == "integer" and "number" in rtypes):
                        errors.append(
                            f"TYPE_CHANGED at '{path}': writer type {wt} not accepted by reader {sorted(rtypes)}"
                        )
        if "enum" in r or "const" in r:
            allowed = {_key(v) for v in r.get("enum", [])} if "enum" in r else {_key(r["const"])}
            written = (
                {_key(v) for v in w["enum"]}
                if "enum" in w
                else ({_key(w["const"])} if "const" in w else None)
            )
            if written is None or not written <= allowed:
                errors.append(f"ENUM_ARRAY_NARROWED at '{path}': the reader allows fewer values")

        def applies(keyword: str) -> bool:
            return (
                wtypes is None
                or bool(wtypes & _APPLIES[keyword])
                or ("number" in _APPLIES[keyword] and "integer" in wtypes)
            )

        for keyword in _LOWER:
            if keyword in r and applies(keyword) and (keyword not in w or w[keyword] < r[keyword]):
                errors.append(
                    f"{keyword.upper()}_INCREASED at '{path}': reader {keyword} {r[keyword]}"
                )
        for keyword in _UPPER:
            if keyword in r and applies(keyword) and (keyword not in w or w[keyword] > r[keyword]):
                errors.append(
                    f"{keyword.upper()}_DECREASED at '{path}': reader {keyword} {r[keyword]}"
                )
        if "multipleOf" in r and applies("multipleOf"):
            wm = w.get("multipleOf")
            if wm is None or (wm / r["multipleOf"]) != int(wm / r["multipleOf"]):
                errors.append(f"MULTIPLE_OF_CHANGED at '{path}'")
        if "pattern" in r and applies("pattern") and w.get("pattern") != r["pattern"]:
            errors.append(f"PATTERN_CHANGED at '{path}': reader pattern {r['pattern']!r}")
        if r.get("uniqueItems") and not w.get("uniqueItems"):
            errors.append(f"UNIQUE_ITEMS_ADDED at '{path}'")
        if wtypes is None or "object" in wtypes:
            errors += self._check_object(reader, writer, r, w, path)
        if wtypes is None or "array" in wtypes:
            errors += self._check_array(reader, writer, r, w, path)
        return errors

    @staticmethod
    def _property_schema(schema: dict[str, Any], name: str) -> Any:
        props = schema.get("properties") or {}
        if name in props:
            return props[name]

        for pattern, sub in (schema.get("patternProperties") or {}).items():
            if re.search(pattern, name):
                return sub
        return schema.get("additionalProperties", True)

    def _check_object(
        self, reader: _Node, writer: _Node, r: dict[str, Any], w: dict[str, Any], path: str
    ) -> list[str]:
        errors: list[str] = []
        for name in r.get("required", []):
            if name not in w.get("required", []):
                errors.append(f"REQUIRED_ATTRIBUTE_ADDED at '{path}/required': {name!r}")
        rprops, wprops = r.get("properties") or {}, w.get("properties") or {}
        for name, wsub in wprops.items():
            rsub = self._property_schema(r, name)
            sub_path = f"{path}/properties/{name}"
            if rsub is False:
                errors.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at '{sub_path}'")
            else:
                errors += self.check(_Node(rsub, reader.root), _Node(wsub, writer.root), sub_path)
        for name, rsub in rprops.items():
            if name in wprops:
                continue
            wsub = self._property_schema(w, name)
            if wsub is False:
                continue
            if self.check(_Node(rsub, reader.root), _Node(wsub, writer.root), path):
                errors.append(
                    f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at '{path}/properties/{name}': "
                    "the writer's open content model may hold other values"
                )
        r_add, w_add = r.get("additionalProperties", True), w.get("additionalProperties", True)
        if w_add is not False and r_add is False and not r.get("patternProperties"):
            errors.append(f"ADDITIONAL_PROPERTIES_REMOVED at '{path}/additionalProperties'")
        elif w_add is not False and r_add is not False:
            errors += self.check(
                _Node(r_add, reader.root), _Node(w_add, writer.root), f"{path}/additionalProperties"
            )
        return errors

    def _check_array(
        self, reader: _Node, writer: _Node, r: dict[str, Any], w: dict[str, Any], path: str
    ) -> list[str]:
        r_items = r.get("prefixItems", r.get("items", True))
        w_items = w.get("prefixItems", w.get("items", True))
        if isinstance(r_items, list) or isinstance(w_items, list):
            r_list = r_items if isinstance(r_items, list) else []
            w_list = w_items if isinstance(w_items, list) else []
            errors: list[str] = []
            for i in range(max(len(r_list), len(w_list))):
                rs = (
                    r_list[i]
                    if i < len(r_list)
                    else r_items
                    if not isinstance(r_items, list)
                    else True
                )
                ws = (
                    w_list[i]
                    if i < len(w_list)
                    else w_items
                    if not isinstance(w_items, list)
                    else True
                )
                errors += self.check(
                    _Node(rs, reader.root), _Node(ws, writer.root), f"{path}/items/{i}"
                )
            return errors
        return self.check(_Node(r_items, reader.root), _Node(w_items, writer.root), f"{path}/items")
