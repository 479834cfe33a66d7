"""Property tests: generated Avro and JSON schemas are compatible with themselves at every
level, normalisation is idempotent, and registering twice is a no-op."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schema_registry.compatibility import CompatibilityLevel, check_compatibility
from schema_registry.formats import get_format
from schema_registry.service import RegistryService, SchemaRequest
from schema_registry.store import MemorySchemaStore

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
PRIMITIVES = st.sampled_from(
    ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
)


def avro_types(depth: int = 2) -> st.SearchStrategy[Any]:
    if depth == 0:
        return PRIMITIVES
    inner = avro_types(depth - 1)
    return st.one_of(
        PRIMITIVES,
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda t: {"type": "map", "values": t}, inner),
        st.builds(
            lambda t: ["null", t] if t != "null" and not isinstance(t, list) else "null", inner
        ),
    )


@st.composite
def avro_records(draw: st.DrawFn) -> str:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    fields = [{"name": n, "type": draw(avro_types())} for n in names]
    return json.dumps({"type": "record", "name": "R", "namespace": "gen", "fields": fields})


@st.composite
def json_schemas(draw: st.DrawFn) -> str:
    names = draw(st.lists(NAMES, min_size=0, max_size=5, unique=True))
    kinds = st.sampled_from(["string", "integer", "number", "boolean", "null"])
    props = {n: {"type": draw(kinds)} for n in names}
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    closed = draw(st.booleans())
    doc: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if closed:
        doc["additionalProperties"] = False
    return json.dumps(doc)


@settings(max_examples=60, deadline=None)
@given(avro_records())
def test_avro_schema_is_compatible_with_itself_at_every_level(text: str) -> None:
    parsed = get_format("AVRO").parse(text, [])
    for level in CompatibilityLevel:
        assert check_compatibility(parsed, [(1, parsed)], level) == []
    again = get_format("AVRO").parse(parsed.normalized(), [])
    assert again.normalized() == parsed.normalized()
    canonical = get_format("AVRO").parse(parsed.canonical(), [])
    assert canonical.canonical() == parsed.canonical()
    assert canonical.normalized() == parsed.normalized()


@settings(max_examples=60, deadline=None)
@given(json_schemas())
def test_json_schema_is_compatible_with_itself_at_every_level(text: str) -> None:
    parsed = get_format("JSON").parse(text, [])
    for level in CompatibilityLevel:
        assert check_compatibility(parsed, [(1, parsed)], level) == []


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(avro_records(), min_size=1, max_size=4))
def test_registering_again_returns_the_same_id_and_version(texts: list[str]) -> None:
    service = RegistryService(MemorySchemaStore())
    service.set_config(None, {"compatibility": "NONE"})
    first = [service.register(f"s{i}", SchemaRequest(t, "AVRO")) for i, t in enumerate(texts)]
    second = [service.register(f"s{i}", SchemaRequest(t, "AVRO")) for i, t in enumerate(texts)]
    assert first == second
    by_text: dict[str, int] = {}
    for text, result in zip(texts, first, strict=True):
        canonical = get_format("AVRO").parse(text, []).canonical()
        assert by_text.setdefault(canonical, result["id"]) == result["id"]


SCALARS = st.sampled_from(
    [
        "double",
        "float",
        "int64",
        "uint64",
        "int32",
        "fixed64",
        "fixed32",
        "bool",
        "string",
        "bytes",
        "uint32",
        "sfixed32",
        "sfixed64",
        "sint32",
        "sint64",
    ]
)
IDENT = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@st.composite
def proto_files(draw: st.DrawFn) -> str:
    """Random proto3 files: scalars, repeated, optional, maps, oneofs, nested messages, enums."""
    lines = ['syntax = "proto3";', f"package {draw(IDENT)}.v{draw(st.integers(1, 3))};"]
    enum_values = draw(st.lists(IDENT, min_size=1, max_size=4, unique=True))
    lines.append(
        "enum Kind { " + " ".join(f"K_{v.upper()} = {i};" for i, v in enumerate(enum_values)) + " }"
    )

    def message(name: str, depth: int) -> str:
        names = draw(st.lists(IDENT, min_size=1, max_size=6, unique=True))
        body: list[str] = []
        oneof: list[str] = []
        number = 1
        for field in names:
            kind = draw(
                st.sampled_from(
                    ["scalar", "repeated", "optional", "map", "oneof", "enum", "nested"]
                )
            )
            scalar = draw(SCALARS)
            if kind == "repeated":
                body.append(f"repeated {scalar} {field} = {number};")
            elif kind == "optional":
                body.append(f"optional {scalar} {field} = {number};")
            elif kind == "map":
                body.append(f"map<string, {scalar}> {field} = {number};")
            elif kind == "oneof":
                oneof.append(f"{scalar} {field} = {number};")
            elif kind == "enum":
                body.append(f"Kind {field} = {number};")
            elif kind == "nested" and depth < 2:
                inner = f"N{field.capitalize()}"
                body.append(message(inner, depth + 1))
                body.append(f"{inner} {field} = {number};")
            else:
                body.append(f"{scalar} {field} = {number};")
            number += draw(st.integers(1, 3))
        if oneof:
            body.append("oneof choice { " + " ".join(oneof) + " }")
        if draw(st.booleans()):
            body.append(f"reserved {number + 10}, {number + 20} to {number + 25};")
        return f"message {name} {{ " + " ".join(body) + " }"

    lines.append(message("Root", 0))
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None)
@given(proto_files())
def test_protobuf_rendering_is_faithful_for_generated_files(text: str) -> None:
    from schema_registry.formats.protobuf import ProtobufSchema
    from schema_registry.formats.protobuf_text import render_proto

    parsed = get_format("PROTOBUF").parse(text, [])
    assert isinstance(parsed, ProtobufSchema)
    rendered = parsed.canonical()
    assert rendered == render_proto(parsed.proto), "rendering recompiles to the same descriptor"
    again = get_format("PROTOBUF").parse(rendered, [])
    assert again.canonical() == rendered
    assert again.compatibility_errors(parsed) == [] and parsed.compatibility_errors(again) == []
