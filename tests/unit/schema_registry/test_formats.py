"""Format-level behaviour: Protobuf rendering round trips, base64 descriptors, JSON/Avro parsing."""

from __future__ import annotations

import base64

import pytest

from schema_registry.errors import InvalidSchema
from schema_registry.formats import ResolvedReference, get_format
from schema_registry.formats.protobuf_text import render_proto

PROTO3 = """syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.shop";
option optimize_for = SPEED;
// comments are not kept
message Order {
  int32 id = 1 [deprecated = true];
  optional string note = 2;
  map<string, Line> lines = 3;
  oneof pay { string card = 4; int64 cash = 5; }
  repeated int32 xs = 6 [packed = false];
  google.protobuf.Timestamp at = 7;
  reserved 9, 11 to 20;
  reserved "old";
  message Line { uint64 qty = 1; Kind kind = 2; enum Kind { A = 0; B = 1; } }
  Status st = 8 [json_name = "STATUS"];
}
enum Status { option allow_alias = true; UNKNOWN = 0; OK = 1; FINE = 1; reserved 5; }
service S { rpc Get(Order) returns (stream Order); }
"""

PROTO2 = r"""syntax = "proto2";
package x;
message M {
  required int32 a = 1 [default = 5];
  optional string s = 2 [default = "h\"i"];
  optional bytes b = 3 [default = "\001x"];
  extensions 100 to max;
}
extend M { optional int32 ext = 100; }
"""


@pytest.mark.parametrize("text", [PROTO3, PROTO2], ids=["proto3", "proto2"])
def test_protobuf_rendering_compiles_back_to_the_same_rendering(text: str) -> None:
    fmt = get_format("PROTOBUF")
    first = fmt.parse(text, [])
    rendered = first.canonical()
    assert rendered == render_proto(first.proto)  # verified, not the fallback
    assert "comments" not in rendered
    second = fmt.parse(rendered, [])
    assert render_proto(second.proto) == rendered


def test_protobuf_base64_descriptor_and_text_share_a_canonical_form() -> None:
    fmt = get_format("PROTOBUF")
    text = fmt.parse(PROTO3, [])
    encoded = text.formatted("serialized")
    assert encoded is not None
    from_descriptor = fmt.parse(encoded, [])
    assert from_descriptor.canonical() == text.canonical()


def test_protobuf_reference_by_import_name() -> None:
    fmt = get_format("PROTOBUF")
    dep = ResolvedReference(
        "money.proto",
        "money",
        1,
        "PROTOBUF",
        'syntax = "proto3";\npackage m;\nmessage Money { int64 cents = 1; }\n',
    )
    parsed = fmt.parse(
        'syntax = "proto3";\nimport "money.proto";\nmessage Order { m.Money total = 1; }\n', [dep]
    )
    assert list(parsed.proto.dependency) == ["money.proto"]
    with pytest.raises(InvalidSchema):
        fmt.parse(
            'syntax = "proto3";\nimport "money.proto";\nmessage Order { m.Money total = 1; }\n', []
        )


@pytest.mark.parametrize("raw", [b"\xff\xfe garbage", b"\x01\x02garbage"])
def test_protobuf_garbage_base64_is_invalid(raw: bytes) -> None:
    with pytest.raises(InvalidSchema):
        get_format("PROTOBUF").parse(base64.b64encode(raw).decode(), [])


def test_json_schema_rejects_invalid_keywords_and_non_objects() -> None:
    fmt = get_format("JSON")
    with pytest.raises(InvalidSchema):
        fmt.parse('{"type": "strang"}', [])
    with pytest.raises(InvalidSchema):
        fmt.parse("[1, 2]", [])
    assert fmt.parse("true", []).canonical() == "true"
    assert (
        fmt.parse('{"b": 1, "a": {"type": "string"}}', []).normalized()
        == '{"a":{"type":"string"},"b":1}'
    )


def test_avro_canonical_and_normalized_forms() -> None:
    fmt = get_format("AVRO")
    a = fmt.parse(
        '{"namespace": "n", "fields": [{"type": "int", "name": "x"}], "name": "R", "type": "record"}',
        [],
    )
    b = fmt.parse(
        '{"type": "record", "name": "n.R", "fields": [{"name": "x", "type": {"type": "int"}}]}', []
    )
    # canonical: like Avro's Java Schema.toString() -- layout and key order do not matter
    assert a.canonical() == b.canonical()
    assert (
        a.canonical()
        == '{"type":"record","name":"R","namespace":"n","fields":[{"name":"x","type":"int"}]}'
    )
    assert a.normalized() == b.normalized()
    assert a.normalized() == '{"type":"record","name":"n.R","fields":[{"name":"x","type":"int"}]}'
    c = fmt.parse('{"type":"record","name":"R","fields":[],"x-b":1,"x-a":2}', [])
    d = fmt.parse('{"type":"record","name":"R","fields":[],"x-a":2,"x-b":1}', [])
    assert c.canonical() != d.canonical() and c.normalized() == d.normalized()


def test_avro_bare_primitive_and_references() -> None:
    fmt = get_format("AVRO")
    assert fmt.parse("string", []).canonical() == '"string"'
    dep = ResolvedReference(
        "a.Addr", "addr", 1, "AVRO", '{"type":"record","name":"Addr","namespace":"a","fields":[]}'
    )
    assert fmt.parse('{"type":"record","name":"P","fields":[{"name":"h","type":"a.Addr"}]}', [dep])
    with pytest.raises(InvalidSchema):
        fmt.parse('{"type":"record","name":"P","fields":[{"name":"h","type":"a.Addr"}]}', [])


def test_protobuf_confluent_builtin_imports_need_no_reference() -> None:
    text = """syntax = "proto3";
package pay;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
message Payment {
  confluent.type.Decimal amount = 1 [(confluent.field_meta).doc = "money"];
}
"""
    parsed = get_format("PROTOBUF").parse(text, [])
    assert list(parsed.proto.dependency) == ["confluent/meta.proto", "confluent/type/decimal.proto"]
    # custom options cannot be rendered faithfully, so the text is kept as written
    assert parsed.canonical() == text.strip()


def test_protobuf_compatibility_looks_into_imported_messages() -> None:
    fmt = get_format("PROTOBUF")
    main = 'syntax = "proto3";\nimport "money.proto";\nmessage Order { m.Money total = 1; }\n'

    def money(field: str) -> ResolvedReference:
        text = f'syntax = "proto3";\npackage m;\nmessage Money {{ {field} cents = 1; }}\n'
        return ResolvedReference("money.proto", "money", 1, "PROTOBUF", text)

    old = fmt.parse(main, [money("int64")])
    widened = fmt.parse(main, [money("int32")])
    changed = fmt.parse(main, [money("string")])
    assert widened.compatibility_errors(old) == []
    errors = changed.compatibility_errors(old)
    assert errors and "FIELD_SCALAR_KIND_CHANGED" in errors[0] and "m.Money" in errors[0]
