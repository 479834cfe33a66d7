"""The compatibility corpus: for each format and level, schema histories that must be accepted
or rejected, each with its reason. ``history`` is oldest first; ``new`` is the candidate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    format: str
    level: str
    history: tuple[str, ...]
    new: str
    compatible: bool
    reason: str

    @property
    def id(self) -> str:
        verdict = "accepts" if self.compatible else "rejects"
        return f"{self.format}-{self.level}-{verdict}-{self.reason}"


# ------------------------------------------------------------------ Avro
def rec(*fields: Any, name: str = "R", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def f(name: str, type_: Any, *default: Any, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": type_, **extra}
    if default:
        out["default"] = default[0]
    return out


def enum(*symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": "Color", "symbols": list(symbols), **extra}


A = f("a", "int")
AVRO = [
    ("BACKWARD", (rec(A),), rec(A, f("b", "string", "x")), True, "field added with default"),
    ("BACKWARD", (rec(A),), rec(A, f("b", "string")), False, "field added without default"),
    ("BACKWARD", (rec(A, f("b", "string")),), rec(A), True, "field removed"),
    ("BACKWARD", (rec(f("a", "int")),), rec(f("a", "long")), True, "int promoted to long"),
    ("BACKWARD", (rec(f("a", "long")),), rec(f("a", "float")), True, "long promoted to float"),
    ("BACKWARD", (rec(f("a", "float")),), rec(f("a", "double")), True, "float promoted to double"),
    ("BACKWARD", (rec(f("a", "int")),), rec(f("a", "double")), True, "int promoted to double"),
    ("BACKWARD", (rec(f("a", "long")),), rec(f("a", "int")), False, "long narrowed to int"),
    ("BACKWARD", (rec(f("a", "double")),), rec(f("a", "float")), False, "double narrowed to float"),
    ("BACKWARD", (rec(f("a", "string")),), rec(f("a", "bytes")), True, "string read as bytes"),
    ("BACKWARD", (rec(f("a", "bytes")),), rec(f("a", "string")), True, "bytes read as string"),
    ("BACKWARD", (rec(f("a", "string")),), rec(f("a", "int")), False, "string changed to int"),
    (
        "BACKWARD",
        (rec(f("c", enum("R", "G"))),),
        rec(f("c", enum("R", "G", "B"))),
        True,
        "enum symbol added",
    ),
    (
        "BACKWARD",
        (rec(f("c", enum("R", "G"))),),
        rec(f("c", enum("R"))),
        False,
        "enum symbol removed without default",
    ),
    (
        "BACKWARD",
        (rec(f("c", enum("R", "G"))),),
        rec(f("c", enum("R", "X", default="X"))),
        True,
        "enum symbol removed with enum default",
    ),
    (
        "FORWARD",
        (rec(f("c", enum("R", "G"))),),
        rec(f("c", enum("R", "G", "B"))),
        False,
        "enum symbol added unreadable by old reader",
    ),
    (
        "BACKWARD",
        (rec(f("a", "string")),),
        rec(f("a", ["null", "string"])),
        True,
        "type widened to union",
    ),
    (
        "BACKWARD",
        (rec(f("a", ["null", "string"])),),
        rec(f("a", "string")),
        False,
        "union narrowed to single type",
    ),
    (
        "BACKWARD",
        (rec(f("a", ["int", "string"])),),
        rec(f("a", ["long", "string", "null"])),
        True,
        "union branches promoted and added",
    ),
    (
        "BACKWARD",
        (rec(f("h", {"type": "fixed", "name": "H", "size": 16})),),
        rec(f("h", {"type": "fixed", "name": "H", "size": 16})),
        True,
        "fixed same size",
    ),
    (
        "BACKWARD",
        (rec(f("h", {"type": "fixed", "name": "H", "size": 16})),),
        rec(f("h", {"type": "fixed", "name": "H", "size": 32})),
        False,
        "fixed size changed",
    ),
    ("BACKWARD", (rec(A, name="Old"),), rec(A, name="New"), False, "record renamed without alias"),
    (
        "BACKWARD",
        (rec(A, name="Old"),),
        rec(A, name="New", aliases=["Old"]),
        True,
        "record renamed with alias",
    ),
    (
        "BACKWARD",
        (rec(A, namespace="a.b"),),
        rec(A, namespace="c.d"),
        True,
        "namespace changed, unqualified name kept",
    ),
    (
        "BACKWARD",
        (rec(f("a", "int")),),
        rec(f("z", "int", aliases=["a"])),
        True,
        "field renamed with alias",
    ),
    (
        "BACKWARD",
        (rec(f("a", "int")),),
        rec(f("z", "int")),
        False,
        "field renamed without alias or default",
    ),
    (
        "BACKWARD",
        (rec(f("n", {"type": "record", "name": "N", "fields": [A]})),),
        rec(f("n", {"type": "record", "name": "N", "fields": [A, f("b", "int", 0)]})),
        True,
        "nested record field added with default",
    ),
    (
        "BACKWARD",
        (rec(f("n", {"type": "record", "name": "N", "fields": [f("a", "string")]})),),
        rec(f("n", {"type": "record", "name": "N", "fields": [f("a", "int")]})),
        False,
        "nested record field type changed",
    ),
    (
        "BACKWARD",
        (rec(f("xs", {"type": "array", "items": "int"})),),
        rec(f("xs", {"type": "array", "items": "long"})),
        True,
        "array items promoted",
    ),
    (
        "BACKWARD",
        (rec(f("xs", {"type": "array", "items": "long"})),),
        rec(f("xs", {"type": "array", "items": "int"})),
        False,
        "array items narrowed",
    ),
    (
        "BACKWARD",
        (rec(f("m", {"type": "map", "values": "int"})),),
        rec(f("m", {"type": "map", "values": "double"})),
        True,
        "map values promoted",
    ),
    (
        "BACKWARD",
        (rec(f("m", {"type": "map", "values": "string"})),),
        rec(f("m", {"type": "map", "values": "int"})),
        False,
        "map values changed",
    ),
    (
        "BACKWARD",
        (rec(f("m", {"type": "map", "values": "int"})),),
        rec(f("m", {"type": "array", "items": "int"})),
        False,
        "map changed to array",
    ),
    (
        "BACKWARD",
        (rec(A, f("next", ["null", "R"], None)),),
        rec(A, f("next", ["null", "R"], None), f("b", "int", 1)),
        True,
        "recursive record field added with default",
    ),
    (
        "BACKWARD",
        (rec(f("t", {"type": "long", "logicalType": "timestamp-millis"})),),
        rec(f("t", "long")),
        True,
        "logical type dropped to base type",
    ),
    ("FORWARD", (rec(A),), rec(A, f("b", "string")), True, "field added, old reader ignores it"),
    ("FORWARD", (rec(A, f("b", "string")),), rec(A), False, "field removed that old reader needs"),
    (
        "FORWARD",
        (rec(A, f("b", "string", "x")),),
        rec(A),
        True,
        "field removed that old reader defaults",
    ),
    ("FORWARD", (rec(f("a", "int")),), rec(f("a", "long")), False, "long not readable as int"),
    ("FULL", (rec(A),), rec(A, f("b", "string", "x")), True, "optional field added"),
    ("FULL", (rec(A),), rec(A, f("b", "string")), False, "required field added"),
    ("FULL", (rec(f("a", "int")),), rec(f("a", "long")), False, "promotion is one way only"),
    ("NONE", (rec(f("a", "int")),), rec(f("a", "string")), True, "anything goes"),
    (
        "BACKWARD",
        (rec(A), rec(A, f("b", "int", 0))),
        rec(A, f("b", "int")),
        True,
        "only latest checked",
    ),
    (
        "BACKWARD_TRANSITIVE",
        (rec(A), rec(A, f("b", "int", 0))),
        rec(A, f("b", "int")),
        False,
        "first version lacks b",
    ),
    (
        "FORWARD",
        (rec(A, f("b", "int")), rec(A, f("b", "int", 0))),
        rec(A),
        True,
        "only latest checked",
    ),
    (
        "FORWARD_TRANSITIVE",
        (rec(A, f("b", "int")), rec(A, f("b", "int", 0))),
        rec(A),
        False,
        "first version needs b",
    ),
    (
        "FULL_TRANSITIVE",
        (rec(A, f("b", "int")), rec(A, f("b", "int", 0))),
        rec(A),
        False,
        "first version needs b",
    ),
    (
        "FULL_TRANSITIVE",
        (rec(A), rec(A, f("b", "int", 0))),
        rec(A, f("b", "int", 0), f("c", "int", 0)),
        True,
        "defaults all the way",
    ),
    ("BACKWARD", ('"int"',), '"long"', True, "primitive promoted"),
]


# ----------------------------------------------------------- JSON Schema
def obj(
    props: dict[str, Any], *, closed: bool = False, required: list[str] | None = None, **extra: Any
) -> str:
    out: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if closed:
        out["additionalProperties"] = False
    if required:
        out["required"] = required
    return json.dumps(out)


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}
JSON = [
    (
        "BACKWARD",
        (obj({"a": S, "b": INT}),),
        obj({"a": S}),
        True,
        "property removed from open model",
    ),
    ("BACKWARD", (obj({"a": S}),), obj({"a": S, "b": INT}), False, "property added to open model"),
    (
        "BACKWARD",
        (obj({"a": S}, closed=True),),
        obj({"a": S, "b": INT}, closed=True),
        True,
        "optional property added to closed model",
    ),
    (
        "BACKWARD",
        (obj({"a": S, "b": INT}, closed=True),),
        obj({"a": S}, closed=True),
        False,
        "property removed from closed model",
    ),
    (
        "BACKWARD",
        (obj({"a": S}, closed=True),),
        obj({"a": S, "b": INT}, closed=True, required=["b"]),
        False,
        "required property added",
    ),
    ("BACKWARD", (obj({"a": S}, required=["a"]),), obj({"a": S}), True, "required removed"),
    ("BACKWARD", (obj({"a": INT}),), obj({"a": N}), True, "integer widened to number"),
    ("BACKWARD", (obj({"a": N}),), obj({"a": INT}), False, "number narrowed to integer"),
    ("BACKWARD", (obj({"a": S}),), obj({"a": INT}), False, "string changed to integer"),
    (
        "BACKWARD",
        (obj({"a": S}),),
        obj({"a": {"type": ["string", "null"]}}),
        True,
        "null added to types",
    ),
    (
        "BACKWARD",
        (obj({"a": {"enum": ["x", "y"]}}),),
        obj({"a": {"enum": ["x", "y", "z"]}}),
        True,
        "enum value added",
    ),
    (
        "BACKWARD",
        (obj({"a": {"enum": ["x", "y"]}}),),
        obj({"a": {"enum": ["x"]}}),
        False,
        "enum value removed",
    ),
    (
        "BACKWARD",
        (obj({"a": {"type": "integer", "maximum": 10}}),),
        obj({"a": {"type": "integer", "maximum": 20}}),
        True,
        "maximum increased",
    ),
    (
        "BACKWARD",
        (obj({"a": {"type": "integer", "maximum": 20}}),),
        obj({"a": {"type": "integer", "maximum": 10}}),
        False,
        "maximum decreased",
    ),
    (
        "BACKWARD",
        (obj({"a": INT}),),
        obj({"a": {"type": "integer", "minimum": 0}}),
        False,
        "minimum added",
    ),
    (
        "BACKWARD",
        (obj({"a": {"type": "integer", "minimum": 5}}),),
        obj({"a": {"type": "integer", "minimum": 0}}),
        True,
        "minimum lowered",
    ),
    (
        "BACKWARD",
        (obj({"a": {"type": "string", "maxLength": 5}}),),
        obj({"a": {"type": "string", "maxLength": 9}}),
        True,
        "maxLength increased",
    ),
    (
        "BACKWARD",
        (obj({"a": S}),),
        obj({"a": {"type": "string", "pattern": "^x"}}),
        False,
        "pattern added",
    ),
    ("BACKWARD", (obj({"a": S}, closed=True),), obj({"a": S}), True, "closed model opened"),
    ("BACKWARD", (obj({"a": S}),), obj({"a": S}, closed=True), False, "open model closed"),
    (
        "BACKWARD",
        (obj({"a": {"oneOf": [S, INT]}}),),
        obj({"a": {"oneOf": [S, INT, {"type": "boolean"}]}}),
        True,
        "oneOf branch added",
    ),
    (
        "BACKWARD",
        (obj({"a": {"oneOf": [S, INT]}}),),
        obj({"a": {"oneOf": [S]}}),
        False,
        "oneOf branch removed",
    ),
    ("BACKWARD", (obj({"a": S}),), obj({"a": {"anyOf": [S, INT]}}), True, "type widened to anyOf"),
    (
        "BACKWARD",
        (obj({"a": {"allOf": [S, {"maxLength": 3}]}}),),
        obj({"a": S}),
        True,
        "allOf constraint dropped",
    ),
    (
        "BACKWARD",
        (obj({"xs": {"type": "array", "items": INT}}),),
        obj({"xs": {"type": "array", "items": N}}),
        True,
        "array items widened",
    ),
    (
        "BACKWARD",
        (obj({"xs": {"type": "array", "items": N}}),),
        obj({"xs": {"type": "array", "items": S}}),
        False,
        "array items changed",
    ),
    (
        "BACKWARD",
        (obj({"o": {"type": "object", "properties": {"x": S}, "additionalProperties": False}}),),
        obj({"o": {"type": "object", "properties": {"x": INT}, "additionalProperties": False}}),
        False,
        "nested property type changed",
    ),
    (
        "BACKWARD",
        (
            obj(
                {"p": {"$ref": "#/definitions/P"}},
                definitions={
                    "P": {"type": "object", "properties": {"x": S}, "additionalProperties": False}
                },
            ),
        ),
        obj(
            {"p": {"$ref": "#/definitions/P"}},
            definitions={
                "P": {
                    "type": "object",
                    "properties": {"x": S, "y": INT},
                    "additionalProperties": False,
                }
            },
        ),
        True,
        "ref target gained optional property in closed model",
    ),
    (
        "BACKWARD",
        (obj({"p": {"$ref": "#/definitions/P"}}, definitions={"P": S}),),
        obj({"p": {"$ref": "#/definitions/P"}}, definitions={"P": INT}),
        False,
        "ref target type changed",
    ),
    ("FORWARD", (obj({"a": INT}),), obj({"a": N}), False, "old integer reader cannot read numbers"),
    (
        "FORWARD",
        (obj({"a": S, "b": INT}),),
        obj({"a": S}),
        False,
        "old reader's property may now hold anything",
    ),
    (
        "FORWARD",
        (obj({"a": S}),),
        obj({"a": S, "b": INT}),
        True,
        "property added is readable by old open model",
    ),
    (
        "FULL",
        (obj({"a": S}, closed=True),),
        obj({"a": S, "b": INT}, closed=True),
        False,
        "old closed reader rejects new property",
    ),
    (
        "FULL",
        (obj({"a": S}),),
        obj({"a": S, "b": {}}),
        True,
        "unconstrained property added to open model",
    ),
    ("NONE", (obj({"a": S}),), obj({"a": INT}), True, "anything goes"),
    (
        "BACKWARD_TRANSITIVE",
        (obj({"a": N}), obj({"a": N, "b": S}, closed=True)),
        obj({"a": INT, "b": S}, closed=True),
        False,
        "narrowed against first version",
    ),
    (
        "FORWARD_TRANSITIVE",
        (obj({"a": INT}), obj({"a": N})),
        obj({"a": N}, description="d"),
        False,
        "first version reads integers only",
    ),
    (
        "FORWARD",
        (obj({"a": INT}), obj({"a": N})),
        obj({"a": N}, description="d"),
        True,
        "only latest checked",
    ),
    (
        "FULL_TRANSITIVE",
        (obj({"a": S}, closed=True), obj({"a": S}, closed=True)),
        obj({"a": S}, closed=True),
        True,
        "unchanged",
    ),
]


# --------------------------------------------------------------- Protobuf
def proto(body: str, package: str = "acme", syntax: str = "proto3", imports: str = "") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{imports}\n{body}\n'


P1 = proto("message Order { int32 id = 1; string name = 2; }")
PROTOBUF = [
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int32 id = 1; string name = 2; double total = 3; }"),
        True,
        "field added",
    ),
    ("BACKWARD", (P1,), proto("message Order { int32 id = 1; }"), True, "field removed"),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int32 id = 1; string title = 2; }"),
        True,
        "field renamed, number kept",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int64 id = 1; string name = 2; }"),
        True,
        "int32 to int64 is wire compatible",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { uint32 id = 1; string name = 2; }"),
        True,
        "int32 to uint32 is wire compatible",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int32 id = 1; bytes name = 2; }"),
        True,
        "string to bytes",
    ),
    (
        "BACKWARD",
        (proto("message Order { sint32 id = 1; }"),),
        proto("message Order { sint64 id = 1; }"),
        True,
        "sint32 to sint64",
    ),
    (
        "BACKWARD",
        (proto("message Order { fixed32 id = 1; }"),),
        proto("message Order { sfixed32 id = 1; }"),
        True,
        "fixed32 to sfixed32",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { string id = 1; string name = 2; }"),
        False,
        "int32 to string",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { sint32 id = 1; string name = 2; }"),
        False,
        "int32 to sint32 changes encoding",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { fixed32 id = 1; string name = 2; }"),
        False,
        "varint to fixed32",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { repeated int32 id = 1; string name = 2; }"),
        False,
        "singular to repeated",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int32 id = 1; string name = 2; }", package="other"),
        False,
        "package changed",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { int32 id = 1; string name = 2; }\nmessage Extra { int32 x = 1; }"),
        True,
        "message added",
    ),
    (
        "FORWARD",
        (P1,),
        proto("message Order { int32 id = 1; string name = 2; }\nmessage Extra { int32 x = 1; }"),
        False,
        "message added is unknown to old reader",
    ),
    (
        "BACKWARD",
        (proto("message Order { int32 id = 1; }\nmessage Extra { int32 x = 1; }"),),
        proto("message Order { int32 id = 1; }"),
        False,
        "message removed",
    ),
    (
        "BACKWARD",
        (
            proto(
                "message Order { Item item = 1; }\nmessage Item { int32 x = 1; }\nmessage Other { int32 x = 1; }"
            ),
        ),
        proto(
            "message Order { Other item = 1; }\nmessage Item { int32 x = 1; }\nmessage Other { int32 x = 1; }"
        ),
        False,
        "message field type changed",
    ),
    (
        "BACKWARD",
        (proto("message Order { Item item = 1; }\nmessage Item { int32 x = 1; }"),),
        proto("message Order { int32 item = 1; }\nmessage Item { int32 x = 1; }"),
        False,
        "message field to scalar",
    ),
    (
        "BACKWARD",
        (proto("enum S { A = 0; B = 1; }\nmessage Order { S s = 1; }"),),
        proto("enum S { A = 0; B = 1; C = 2; }\nmessage Order { S s = 1; }"),
        True,
        "enum value added",
    ),
    (
        "BACKWARD",
        (proto("enum S { A = 0; B = 1; }\nmessage Order { S s = 1; }"),),
        proto("message Order { int32 s = 1; }"),
        True,
        "enum read as int32",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { oneof key { int32 id = 1; } string name = 2; }"),
        True,
        "single field moved into new oneof",
    ),
    (
        "BACKWARD",
        (P1,),
        proto("message Order { oneof key { int32 id = 1; string name = 2; } }"),
        False,
        "two fields moved into one oneof",
    ),
    (
        "BACKWARD",
        (proto("message Order { oneof key { int32 id = 1; string code = 3; } string name = 2; }"),),
        proto("message Order { oneof key { int32 id = 1; string code = 3; string name = 2; } }"),
        False,
        "field moved into existing oneof",
    ),
    (
        "BACKWARD",
        (proto("message Order { oneof key { int32 id = 1; string code = 3; } }"),),
        proto("message Order { oneof key { int32 id = 1; } }"),
        False,
        "field removed from oneof",
    ),
    (
        "BACKWARD",
        (proto("message Order { oneof key { int32 id = 1; } }"),),
        proto("message Order { oneof key { int32 id = 1; string code = 3; } }"),
        True,
        "field added to oneof",
    ),
    (
        "BACKWARD",
        (proto("message Order { optional int32 id = 1; }", syntax="proto2"),),
        proto("message Order { optional int32 id = 1; required int32 v = 2; }", syntax="proto2"),
        False,
        "required field added",
    ),
    (
        "BACKWARD",
        (proto("message Order { required int32 id = 1; optional int32 v = 2; }", syntax="proto2"),),
        proto("message Order { optional int32 v = 2; }", syntax="proto2"),
        False,
        "required field removed",
    ),
    (
        "BACKWARD",
        (proto("message Order { message Line { int32 q = 1; } Line line = 1; }"),),
        proto("message Order { message Line { string q = 1; } Line line = 1; }"),
        False,
        "nested message field changed",
    ),
    (
        "BACKWARD",
        (proto("message Order { map<string, int32> m = 1; }"),),
        proto("message Order { map<string, int64> m = 1; }"),
        True,
        "map value widened",
    ),
    (
        "BACKWARD",
        (
            proto(
                "message Order { int32 id = 1; }",
                imports='import "google/protobuf/timestamp.proto";',
            ),
        ),
        proto(
            "message Order { int32 id = 1; google.protobuf.Timestamp at = 2; }",
            imports='import "google/protobuf/timestamp.proto";',
        ),
        True,
        "well-known import used",
    ),
    (
        "FULL",
        (P1,),
        proto("message Order { int32 id = 1; string name = 2; bool flag = 3; }"),
        True,
        "field added",
    ),
    (
        "FULL",
        (P1,),
        proto("message Order { string id = 1; string name = 2; }"),
        False,
        "int32 to string",
    ),
    ("NONE", (P1,), proto("message Order { string id = 1; }"), True, "anything goes"),
    (
        "BACKWARD_TRANSITIVE",
        (proto("message Order { int32 id = 1; }"), proto("message Order { }")),
        proto("message Order { string id = 1; }"),
        False,
        "number reused with other type",
    ),
    (
        "BACKWARD",
        (proto("message Order { int32 id = 1; }"), proto("message Order { }")),
        proto("message Order { string id = 1; }"),
        True,
        "only latest checked",
    ),
    (
        "FORWARD_TRANSITIVE",
        (P1, proto("message Order { int32 id = 1; }")),
        proto("message Order { int32 id = 1; int32 name = 2; }"),
        False,
        "first version reads field 2 as string",
    ),
    (
        "FORWARD",
        (P1, proto("message Order { int32 id = 1; }")),
        proto("message Order { int32 id = 1; int32 name = 2; }"),
        True,
        "only latest checked",
    ),
    (
        "FULL_TRANSITIVE",
        (P1, proto("message Order { int32 id = 1; }")),
        proto("message Order { int32 id = 1; int32 name = 2; }"),
        False,
        "field 2 changed type against first version",
    ),
    (
        "FULL_TRANSITIVE",
        (P1, proto("message Order { int32 id = 1; string name = 2; bool x = 3; }")),
        proto("message Order { int32 id = 1; string name = 2; bool x = 3; bool y = 4; }"),
        True,
        "fields added",
    ),
]

# fmt: off
PROTOBUF += [
    ("BACKWARD", (proto("message Order { oneof key { int32 id = 1; string code = 3; } }"),), proto("message Order { int32 id = 1; string code = 3; }"), True, "oneof dissolved into plain fields"),
    ("BACKWARD", (proto("message Order { oneof key { int32 id = 1; string code = 3; } int32 n = 4; }"),), proto("message Order { int32 n = 4; }"), True, "oneof removed entirely"),
    ("BACKWARD", (proto("message Order { oneof key { int32 id = 1; string code = 3; } }"),), proto("message Order { oneof key { int32 id = 1; } string code = 3; }"), False, "field moved out of a surviving oneof"),
    ("BACKWARD", (proto("message Order { optional int32 id = 1; }", syntax="proto2"),), proto("message Order { required int32 id = 1; }", syntax="proto2"), False, "optional field made required"),
]

# Maps and singular <-> repeated, as Confluent's rules have them: a map is its own kind whose
# key and value types are compared; a label change is wire compatible for length-delimited
# values (string, bytes, messages) and not for numbers, bools and enums (packed encoding).
MAP_INT = proto("message Order { map<string, int32> m = 1; }")
ENTRY = "message MEntry { string key = 1; int32 value = 2; }"
PROTOBUF += [
    ("BACKWARD", (MAP_INT,), proto("message Order { map<string, string> m = 1; }"), False, "map value type changed"),
    ("FORWARD", (MAP_INT,), proto("message Order { map<string, string> m = 1; }"), False, "map value type changed"),
    ("BACKWARD", (MAP_INT,), proto("message Order { map<int32, int32> m = 1; }"), False, "map key type changed"),
    ("BACKWARD", (proto("message Order { map<int32, int32> m = 1; }"),), proto("message Order { map<int64, int32> m = 1; }"), True, "map key widened in its wire group"),
    ("BACKWARD", (MAP_INT,), proto("message Order { map<string, sint32> m = 1; }"), False, "map value encoding changed"),
    ("BACKWARD", (proto("message Order { map<string, Item> m = 1; }\nmessage Item { int32 x = 1; }\nmessage Other { int32 x = 1; }"),), proto("message Order { map<string, Other> m = 1; }\nmessage Item { int32 x = 1; }\nmessage Other { int32 x = 1; }"), False, "map value message type changed"),
    ("BACKWARD", (MAP_INT,), proto(f"message Order {{ {ENTRY} repeated MEntry m = 1; }}"), False, "map to repeated entry message is a kind change"),
    ("BACKWARD", (proto(f"message Order {{ {ENTRY} repeated MEntry m = 1; }}"),), MAP_INT, False, "repeated entry message to map is a kind change"),
    ("BACKWARD", (MAP_INT,), proto("message Order { repeated int32 m = 1; }"), False, "map to repeated scalar"),
    ("BACKWARD", (proto("message Order { optional string s = 1; }", syntax="proto2"),), proto("message Order { repeated string s = 1; }", syntax="proto2"), True, "optional string made repeated"),
    ("FULL", (proto("message Order { optional string s = 1; }", syntax="proto2"),), proto("message Order { repeated string s = 1; }", syntax="proto2"), True, "optional string made repeated"),
    ("BACKWARD", (proto("message Order { repeated bytes b = 1; }", syntax="proto2"),), proto("message Order { optional bytes b = 1; }", syntax="proto2"), True, "repeated bytes made optional"),
    ("BACKWARD", (proto("message Order { optional string s = 1; }"),), proto("message Order { repeated bytes s = 1; }"), True, "optional string made repeated bytes"),
    ("BACKWARD", (proto("message Order { optional Item i = 1; }\nmessage Item { int32 x = 1; }"),), proto("message Order { repeated Item i = 1; }\nmessage Item { int32 x = 1; }"), True, "optional message made repeated"),
    ("BACKWARD", (proto("message Order { optional int32 n = 1; }", syntax="proto2"),), proto("message Order { repeated int32 n = 1; }", syntax="proto2"), False, "optional int32 made repeated"),
    ("BACKWARD", (proto("enum S { A = 0; B = 1; }\nmessage Order { optional S s = 1; }", syntax="proto2"),), proto("enum S { A = 0; B = 1; }\nmessage Order { repeated S s = 1; }", syntax="proto2"), False, "optional enum made repeated"),
    ("BACKWARD", (proto("message Order { optional string s = 1; }", syntax="proto2"),), proto("message Order { repeated int32 s = 1; }", syntax="proto2"), False, "optional string made repeated int32"),
]
# fmt: on

CASES = [
    Case(fmt, level, history, new, ok, reason)
    for fmt, table in (("AVRO", AVRO), ("JSON", JSON), ("PROTOBUF", PROTOBUF))
    for level, history, new, ok, reason in table
]
