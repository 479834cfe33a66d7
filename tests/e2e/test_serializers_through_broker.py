"""Confluent serializers against Tidelake's registry, producing through Tidelake's broker."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.support.platform import TidelakeProcess

AVRO = """{"type": "record", "name": "Order", "namespace": "shop",
  "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
             {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
             {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]}"""

JSON_SCHEMA = """{"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
  "properties": {"id": {"type": "integer"}, "kind": {"type": "string", "enum": ["a", "b"]}},
  "required": ["id"], "additionalProperties": false}"""


def _round_trip(
    proc: TidelakeProcess,
    topic: str,
    values: list[Any],
    serialize: Callable[..., bytes],
    deserialize: Callable[..., Any],
) -> list[Any]:
    p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "log_level": 0})
    for v in values:
        p.produce(topic, serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": proc.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    c.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    while len(out) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append(deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)))
    c.close()
    return out


def test_avro_json_and_protobuf_serializers_work_unchanged(tidelake: TidelakeProcess) -> None:
    from decimal import Decimal

    client = SchemaRegistryClient({"url": tidelake.registry_url})

    orders = [
        {"id": i, "item": f"item-{i}", "price": Decimal(f"{i}.25"), "tags": ["x"] * (i % 3)}
        for i in range(20)
    ]
    got = _round_trip(
        tidelake, "orders-avro", orders, AvroSerializer(client, AVRO), AvroDeserializer(client)
    )
    assert got == orders
    assert client.get_latest_version("orders-avro-value").schema.schema_type == "AVRO"

    # registered by hand first, then used without auto-registration
    sid = client.register_schema("events-json-value", Schema(JSON_SCHEMA, "JSON"))
    events = [{"id": i, "kind": "ab"[i % 2]} for i in range(10)]
    ser = JSONSerializer(
        JSON_SCHEMA, client, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    got = _round_trip(tidelake, "events-json", events, ser, JSONDeserializer(JSON_SCHEMA))
    assert got == events
    assert client.get_latest_version("events-json-value").schema_id == sid

    f = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="iot", syntax="proto3")
    msg = f.message_type.add(name="Reading")
    msg.field.add(
        name="sensor",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    msg.field.add(
        name="value",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    reading_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("iot.Reading"))
    readings = [reading_cls(sensor=f"s{i}", value=i / 2) for i in range(10)]
    got = _round_trip(
        tidelake,
        "readings-proto",
        readings,
        ProtobufSerializer(reading_cls, client, conf={"use.deprecated.format": False}),
        ProtobufDeserializer(reading_cls, conf={"use.deprecated.format": False}),
    )
    assert [(r.sensor, r.value) for r in got] == [(r.sensor, r.value) for r in readings]
    assert client.get_latest_version("readings-proto-value").schema.schema_type == "PROTOBUF"
