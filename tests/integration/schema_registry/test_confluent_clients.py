"""confluent-kafka's SchemaRegistryClient and serializers against the running registry:
serializer -> bytes -> deserializer round trips, schemas registered automatically and by hand."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.integration.schema_registry.conftest import RunningRegistry

USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture
def client(registry: RunningRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_avro_round_trip_with_automatic_registration(client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, json.dumps(USER))
    value = {"id": 7, "name": "ada", "email": None}
    data = serializer(value, ctx("users-auto"))
    assert data is not None and data[0] == 0
    schema_id = int.from_bytes(data[1:5], "big")
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert AvroDeserializer(fresh)(data, ctx("users-auto")) == value
    latest = client.get_latest_version("users-auto-value")
    assert latest.schema_id == schema_id and latest.version == 1


def test_avro_with_schema_registered_by_hand_and_use_latest(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("users-manual-value", Schema(json.dumps(USER), "AVRO"))
    serializer = AvroSerializer(
        client, json.dumps(USER), conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    data = serializer({"id": 1, "name": "bo", "email": "b@x"}, ctx("users-manual"))
    assert data is not None and int.from_bytes(data[1:5], "big") == schema_id
    assert AvroDeserializer(SchemaRegistryClient({"url": client._rest_client.base_urls[0]}))(
        data, ctx("users-manual")
    ) == {"id": 1, "name": "bo", "email": "b@x"}


def test_avro_evolution_reader_schema_decodes_old_data(client: SchemaRegistryClient) -> None:
    old = {"type": "record", "name": "Evt", "fields": [{"name": "a", "type": "int"}]}
    new = {
        "type": "record",
        "name": "Evt",
        "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "x"}],
    }
    data = AvroSerializer(client, json.dumps(old))({"a": 1}, ctx("evt"))
    client.register_schema("evt-value", Schema(json.dumps(new), "AVRO"))
    reader = AvroDeserializer(client, json.dumps(new))
    assert reader(data, ctx("evt")) == {"a": 1, "b": "x"}
    bad = {"type": "record", "name": "Evt", "fields": [{"name": "c", "type": "int"}]}
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("evt-value", Schema(json.dumps(bad), "AVRO"))
    assert err.value.http_status_code == 409 and err.value.error_code == 409


def test_client_admin_calls(client: SchemaRegistryClient) -> None:
    sid = client.register_schema("admin-value", Schema(json.dumps(USER), "AVRO"))
    assert "admin-value" in client.get_subjects()
    assert client.get_versions("admin-value") == [1]
    assert client.lookup_schema("admin-value", Schema(json.dumps(USER), "AVRO")).schema_id == sid
    assert client.get_schema(sid).schema_str is not None
    assert client.set_compatibility("admin-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("admin-value") == "FULL"
    assert client.test_compatibility("admin-value", Schema(json.dumps(USER), "AVRO")) is True
    assert "AVRO" in client.get_schema_types()
    assert client.delete_version("admin-value", 1) == 1
    assert client.delete_subject("admin-value", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as err:
        client.get_latest_version("admin-value")
    assert err.value.error_code == 40401


def test_avro_references_round_trip(client: SchemaRegistryClient) -> None:
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "city", "type": "string"}],
    }
    client.register_schema("address-value", Schema(json.dumps(address), "AVRO"))
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "com.acme",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "home", "type": "com.acme.Address"},
        ],
    }
    refs = [SchemaReference("com.acme.Address", "address-value", 1)]
    pid = client.register_schema("person-value", Schema(json.dumps(person), "AVRO", refs))
    serializer = AvroSerializer(
        client,
        Schema(json.dumps(person), "AVRO", refs),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    value = {"name": "ada", "home": {"city": "london"}}
    data = serializer(value, ctx("person"))
    assert data is not None and int.from_bytes(data[1:5], "big") == pid
    assert (
        AvroDeserializer(SchemaRegistryClient({"url": client._rest_client.base_urls[0]}))(
            data, ctx("person")
        )
        == value
    )
    assert client.get_referenced_by("address-value", 1) == [pid]


ORDER_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id"],
}


def _to_dict(obj: Any, _: SerializationContext) -> Any:
    return obj


def test_json_schema_round_trip(client: SchemaRegistryClient) -> None:
    serializer = JSONSerializer(json.dumps(ORDER_SCHEMA), client, to_dict=_to_dict)
    value = {"id": 3, "item": "pen"}
    data = serializer(value, ctx("orders-json"))
    assert data is not None
    deserializer = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    )
    assert deserializer(data, ctx("orders-json")) == value
    registered = client.get_latest_version("orders-json-value")
    assert registered.schema.schema_type == "JSON"


def test_json_schema_registered_by_hand_with_reference(client: SchemaRegistryClient) -> None:
    item = {"type": "object", "properties": {"sku": {"type": "string"}}}
    client.register_schema("item-json", Schema(json.dumps(item), "JSON"))
    cart = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "item.json"}}},
    }
    refs = [SchemaReference("item.json", "item-json", 1)]
    cid = client.register_schema("cart-json-value", Schema(json.dumps(cart), "JSON", refs))
    assert client.get_schema(cid).references[0].name == "item.json"
    serializer = JSONSerializer(
        Schema(json.dumps(cart), "JSON", refs),
        client,
        to_dict=_to_dict,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    value = {"items": [{"sku": "a1"}]}
    data = serializer(value, ctx("cart-json"))
    assert data is not None and int.from_bytes(data[1:5], "big") == cid
    assert JSONDeserializer(None, schema_registry_client=client)(data, ctx("cart-json")) == value


def _message_class(
    pool: descriptor_pool.DescriptorPool, files: list[descriptor_pb2.FileDescriptorProto], name: str
) -> Any:
    for proto in files:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _file(
    name: str, package: str, build: Any, deps: tuple[str, ...] = ()
) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name=name, package=package, syntax="proto3", dependency=list(deps)
    )
    build(proto)
    return proto


def test_protobuf_round_trip_with_imported_dependency(client: SchemaRegistryClient) -> None:
    F = descriptor_pb2.FieldDescriptorProto

    def money(p: descriptor_pb2.FileDescriptorProto) -> None:
        m = p.message_type.add(name="Money")
        m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)

    def order(p: descriptor_pb2.FileDescriptorProto) -> None:
        m = p.message_type.add(name="Order")
        m.field.add(name="id", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
        m.field.add(
            name="total",
            number=2,
            type=F.TYPE_MESSAGE,
            type_name=".shop.Money",
            label=F.LABEL_OPTIONAL,
        )

    files = [
        _file("shop/money.proto", "shop", money),
        _file("shop/order.proto", "shop", order, ("shop/money.proto",)),
    ]
    Order = _message_class(descriptor_pool.DescriptorPool(), files, "shop.Order")
    serializer = ProtobufSerializer(Order, client, conf={"use.deprecated.format": False})
    msg = Order(id=5)
    msg.total.cents = 1250
    data = serializer(msg, ctx("orders-pb"))
    assert data is not None
    deserializer = ProtobufDeserializer(
        Order, {"use.deprecated.format": False}, schema_registry_client=client
    )
    back = deserializer(data, ctx("orders-pb"))
    assert back.id == 5 and back.total.cents == 1250
    latest = client.get_latest_version("orders-pb-value")
    assert latest.schema.references[0].name == "shop/money.proto"
    raw = client.get_schema(latest.schema_id, fmt="serialized").schema_str
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(raw))
    assert [m.name for m in proto.message_type] == ["Order"]
    assert list(proto.dependency) == ["shop/money.proto"]


def test_protobuf_text_schema_registered_by_hand(client: SchemaRegistryClient) -> None:
    text = 'syntax = "proto3";\npackage inv;\nmessage Item { string sku = 1; int32 qty = 2; }\n'
    sid = client.register_schema("items-pb-value", Schema(text, "PROTOBUF"))
    stored = client.get_schema(sid).schema_str
    assert "message Item {" in stored and "string sku = 1;" in stored  # canonical rendering
    # the same schema as a base64 descriptor (what ProtobufSerializer sends) is the same id
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    serialized_text = fresh.get_schema(sid, fmt="serialized").schema_str
    assert client.register_schema("items-pb-value", Schema(serialized_text, "PROTOBUF")) == sid
    serialized = SchemaRegistryClient({"url": client._rest_client.base_urls[0]}).get_schema(
        sid, fmt="serialized"
    )
    assert serialized.schema_str and "syntax" not in serialized.schema_str
    bad = 'syntax = "proto3";\npackage inv;\nmessage Item { bool sku = 1; int32 qty = 2; }\n'
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("items-pb-value", Schema(bad, "PROTOBUF"))
    assert err.value.error_code == 409
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("items-pb-value", Schema("syntax = nonsense", "PROTOBUF"))
    assert err.value.error_code == 42201


def test_avro_round_trip_in_a_schema_context(client: SchemaRegistryClient) -> None:
    def in_context(ctx: SerializationContext, _record_name: str | None) -> str:
        return f":.tenant:{ctx.topic}-value"

    conf = {"subject.name.strategy": in_context}
    other = {"type": "record", "name": "Noise", "fields": [{"name": "n", "type": "int"}]}
    client.register_schema("noise-value", Schema(json.dumps(other), "AVRO"))
    tenant_user = {**USER, "name": "TenantUser"}
    serializer = AvroSerializer(client, json.dumps(tenant_user), conf=conf)
    value = {"id": 9, "name": "ctx", "email": None}
    data = serializer(value, ctx("tenant-users"))
    assert data is not None
    schema_id = int.from_bytes(data[1:5], "big")
    assert schema_id == 1, "the first schema of a new context gets id 1"
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert AvroDeserializer(fresh, conf=conf)(data, ctx("tenant-users")) == value
    default_ctx = SchemaRegistryClient({"url": client._rest_client.base_urls[0]}).get_schema(1)
    assert json.loads(default_ctx.schema_str)["name"] != "TenantUser"
    assert ".tenant" in client.get_contexts()


def test_client_configured_with_a_context_url(registry: RunningRegistry) -> None:
    scoped = SchemaRegistryClient({"url": f"{registry.url}/contexts/.scoped"})
    schema = {"type": "record", "name": "Scoped", "fields": [{"name": "s", "type": "string"}]}
    data = AvroSerializer(scoped, json.dumps(schema))({"s": "x"}, ctx("scoped"))
    assert data is not None and int.from_bytes(data[1:5], "big") == 1
    reader = AvroDeserializer(SchemaRegistryClient({"url": f"{registry.url}/contexts/.scoped"}))
    assert reader(data, ctx("scoped")) == {"s": "x"}
    assert scoped.get_latest_version("scoped-value").schema_id == 1
    assert ":.scoped:scoped-value" in SchemaRegistryClient({"url": registry.url}).get_subjects()


def test_avro_round_trip_with_schema_guid_in_headers(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry import (
        dual_schema_id_deserializer,
        header_schema_id_serializer,
    )

    schema = {"type": "record", "name": "Headed", "fields": [{"name": "h", "type": "string"}]}
    serializer = AvroSerializer(
        client, json.dumps(schema), conf={"schema.id.serializer": header_schema_id_serializer}
    )
    headers: list[tuple[str, bytes]] = []
    context = SerializationContext("headed", MessageField.VALUE, headers)
    data = serializer({"h": "carried by guid"}, context)
    assert data is not None and headers, "the GUID travels in a header"
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    deserializer = AvroDeserializer(
        fresh, conf={"schema.id.deserializer": dual_schema_id_deserializer}
    )
    assert deserializer(data, context) == {"h": "carried by guid"}


def test_metadata_and_rule_sets_are_kept_and_found_by_metadata(
    client: SchemaRegistryClient,
) -> None:
    from confluent_kafka.schema_registry import Metadata, MetadataProperties, Rule, RuleSet
    from confluent_kafka.schema_registry.common.schema_registry_client import RuleKind, RuleMode

    schema = {"type": "record", "name": "Contract", "fields": [{"name": "c", "type": "string"}]}
    v1 = Schema(
        json.dumps(schema),
        "AVRO",
        metadata=Metadata(None, MetadataProperties({"owner": "a", "major": "1"}), None),
    )
    rules = RuleSet(
        None,
        [
            Rule(
                name="checkLen",
                doc=None,
                kind=RuleKind.CONDITION,
                mode=RuleMode.WRITE,
                type="CEL",
                tags=None,
                params=None,
                expr="size(message.c) < 10",
                on_success=None,
                on_failure=None,
                disabled=False,
            )
        ],
    )
    v2_schema = {
        **schema,
        "fields": [*schema["fields"], {"name": "d", "type": "int", "default": 0}],
    }
    v2 = Schema(
        json.dumps(v2_schema),
        "AVRO",
        metadata=Metadata(None, MetadataProperties({"owner": "a", "major": "2"}), None),
        rule_set=rules,
    )
    client.register_schema("contract-value", v1)
    client.register_schema("contract-value", v2)
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    latest = fresh.get_latest_version("contract-value")
    assert latest.version == 2 and latest.schema.rule_set is not None
    assert latest.schema.metadata.properties.properties["major"] == "2"
    found = fresh.get_latest_with_metadata("contract-value", {"major": "1"})
    assert found.version == 1
    # re-registering the latest schema without metadata inherits it: same version, no new id
    again = fresh.register_schema_full_response(
        "contract-value", Schema(json.dumps(v2_schema), "AVRO")
    )
    assert again.version == 2 and again.schema_id == latest.schema_id
    with pytest.raises(SchemaRegistryError) as err:
        fresh.get_latest_with_metadata("contract-value", {"major": "3"})
    assert err.value.error_code == 40403
