"""JSON Schema and Protobuf values through the built-in registry."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from tests.integration.table_topic.conftest import TableTopics

JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {
        "sensor": {"type": "string"},
        "value": {"type": "number"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "pos": {"$ref": "#/definitions/Pos"},
    },
    "definitions": {
        "Pos": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        }
    },
}


def test_json_schema_values(tt: TableTopics) -> None:
    topic = "json-readings"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = JSONSerializer(json.dumps(JSON_SCHEMA), sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    recs = [
        {
            "sensor": f"s{i}",
            "value": i * 1.5,
            "count": i,
            "ok": i % 2 == 0,
            "at": f"2024-05-01T00:00:{i:02d}Z",
            "labels": ["a", str(i)],
            "pos": {"x": i, "y": -i},
        }
        for i in range(30)
    ]
    tt.produce(topic, [(None, ser(r, ctx)) for r in recs])
    rows = tt.wait_rows(topic, 30)
    assert rows.schema.field("count").type == pa.int64()
    assert rows.schema.field("value").type == pa.float64()
    assert rows.schema.field("at").type == pa.timestamp("us", tz="UTC")
    got = {r["sensor"]: r for r in rows.to_pylist()}
    assert got["s3"]["value"] == 4.5 and got["s3"]["count"] == 3 and got["s3"]["ok"] is False
    assert got["s3"]["at"] == dt.datetime(2024, 5, 1, 0, 0, 3, tzinfo=dt.UTC)
    assert got["s3"]["labels"] == ["a", "3"]
    assert got["s3"]["pos"] == {"x": 3, "y": -3}


def _proto_class() -> type:
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "tidelake_test_event.proto"
    fdp.package = "tt"
    fdp.syntax = "proto3"
    fdp.dependency.append("google/protobuf/timestamp.proto")
    m = fdp.message_type.add()
    m.name = "Event"
    F = descriptor_pb2.FieldDescriptorProto
    e = fdp.enum_type.add()
    e.name = "Kind"
    for n, v in (("UNKNOWN", 0), ("CLICK", 1), ("VIEW", 2)):
        ev = e.value.add()
        ev.name, ev.number = n, v
    inner = m.nested_type.add()
    inner.name = "Item"
    for i, (name, typ) in enumerate((("sku", F.TYPE_STRING), ("qty", F.TYPE_INT32)), 1):
        f = inner.field.add()
        f.name, f.number, f.type, f.label = name, i, typ, F.LABEL_OPTIONAL
    fields = [
        ("id", F.TYPE_INT64, None, F.LABEL_OPTIONAL),
        ("user", F.TYPE_STRING, None, F.LABEL_OPTIONAL),
        ("price", F.TYPE_DOUBLE, None, F.LABEL_OPTIONAL),
        ("kind", F.TYPE_ENUM, ".tt.Kind", F.LABEL_OPTIONAL),
        ("items", F.TYPE_MESSAGE, ".tt.Event.Item", F.LABEL_REPEATED),
        ("at", F.TYPE_MESSAGE, ".google.protobuf.Timestamp", F.LABEL_OPTIONAL),
        ("blob", F.TYPE_BYTES, None, F.LABEL_OPTIONAL),
    ]
    for i, (name, typ, tname, label) in enumerate(fields, 1):
        f = m.field.add()
        f.name, f.number, f.type, f.label = name, i, typ, label
        if tname:
            f.type_name = tname
    pool = descriptor_pool.Default()
    timestamp_pb2.Timestamp  # noqa: B018 - registers the import
    try:
        desc = pool.FindMessageTypeByName("tt.Event")
    except KeyError:
        pool.Add(fdp)
        desc = pool.FindMessageTypeByName("tt.Event")
    return message_factory.GetMessageClass(desc)


def test_protobuf_values(tt: TableTopics) -> None:
    topic = "proto-events"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        },
    )
    Event = _proto_class()
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = ProtobufSerializer(Event, sr, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    payloads = []
    for i in range(25):
        ev = Event(id=i, user=f"u{i}", price=i / 4, kind=1 + i % 2, blob=bytes([i]))
        it = ev.items.add()
        it.sku, it.qty = f"sku{i}", i
        ev.at.FromDatetime(dt.datetime(2024, 2, 1, 0, 0, i))
        payloads.append((None, ser(ev, ctx)))
    tt.produce(topic, payloads)
    rows = tt.wait_rows(topic, 25)
    assert rows.schema.field("id").type == pa.int64()
    assert rows.schema.field("at").type == pa.timestamp("us", tz="UTC")
    got = {r["id"]: r for r in rows.to_pylist()}
    r = got[5]
    assert r["user"] == "u5" and r["price"] == 1.25 and r["kind"] == "VIEW"
    assert r["items"] == [{"sku": "sku5", "qty": 5}]
    assert r["at"] == dt.datetime(2024, 2, 1, 0, 0, 5, tzinfo=dt.UTC)
    assert r["blob"] == bytes([5])


def test_json_schema_evolution_adds_columns_and_widens(tt: TableTopics) -> None:
    topic = "json-evolving"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    sr.set_compatibility(subject_name=f"{topic}-value", level="NONE")
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "tags": {
                "type": "array",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
        },
    }
    v2 = json.loads(json.dumps(v1))
    v2["properties"]["extra"] = {"type": "string"}
    v2["properties"]["tags"]["items"]["properties"]["w"] = {"type": "number"}  # nested in a list
    ser1 = JSONSerializer(json.dumps(v1), sr)
    ser2 = JSONSerializer(json.dumps(v2), sr)
    tt.produce(topic, [(None, ser1({"id": i, "tags": [{"k": "a"}]}, ctx)) for i in range(5)])
    tt.wait_rows(topic, 5)
    tt.produce(
        topic,
        [
            (None, ser2({"id": i, "extra": "x", "tags": [{"k": "b", "w": 1.5}]}, ctx))
            for i in range(5, 10)
        ],
    )
    rows = tt.wait_rows(topic, 10)
    got = {r["id"]: r for r in rows.to_pylist()}
    assert got[7]["extra"] == "x" and got[7]["tags"] == [{"k": "b", "w": 1.5}]
    assert got[2]["extra"] is None and got[2]["tags"] == [{"k": "a", "w": None}]
