"""Avro by schema id: types, flatten, evolution mid-stream, incompatible changes to the dead-letter topic."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.table_topic.conftest import TableTopics

ADDRESS_V1 = {
    "type": "record",
    "name": "Address",
    "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}],
}
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "score", "type": "float"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "address", "type": ADDRESS_V1},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def _v2() -> dict:
    schema = json.loads(json.dumps(ORDER_V1))
    fields = schema["fields"]
    addr = fields[9]["type"]
    addr["fields"][1]["type"] = "long"  # int -> long
    addr["fields"].append(
        {"name": "city", "type": ["null", "string"], "default": None}
    )  # nested add
    fields[6]["type"] = "double"  # float -> double
    fields[2]["type"]["precision"] = 12  # decimal widening
    fields.append({"name": "extra", "type": ["null", "long"], "default": None})  # new column
    del fields[10]  # 'note' dropped: stays as an optional column
    return schema


def _v3_incompatible() -> dict:
    schema = _v2()
    schema["fields"][1]["type"] = "int"  # name: string -> int
    return schema


def _order(i: int, v: int = 1) -> dict:
    rec = {
        "id": i,
        "name": f"order-{i}",
        "amount": decimal.Decimal(f"{i}.25"),
        "created": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i % 30),
        "uid": uuid.UUID(int=i),
        "score": 0.5 * i,
        "tags": [f"t{i}", "x"],
        "attrs": {"a": i},
        "address": {"street": f"s{i}", "zip": 1000 + i},
    }
    if v == 1:
        rec["note"] = None if i % 2 else f"n{i}"
    else:
        rec["address"]["city"] = f"c{i}"
        rec["extra"] = i * 10
    if v == 3:
        rec["name"] = i
    return rec


def test_avro_types_flatten_and_evolution(tt: TableTopics) -> None:
    topic = "avro-orders"
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
    ser1 = AvroSerializer(sr, json.dumps(ORDER_V1))
    tt.produce(topic, [(str(i).encode(), ser1(_order(i), ctx)) for i in range(50)])
    rows = tt.wait_rows(topic, 50)
    schema = rows.schema
    assert schema.field("id").type == pa.int64()
    assert schema.field("amount").type == pa.decimal128(10, 2)
    assert schema.field("created").type == pa.timestamp("us", tz="UTC")
    assert schema.field("day").type == pa.date32()
    assert schema.field("score").type == pa.float32()
    by_id = {r["id"]: r for r in rows.to_pylist()}
    r7 = by_id[7]
    assert r7["name"] == "order-7"
    assert r7["amount"] == decimal.Decimal("7.25")
    assert r7["created"] == dt.datetime(2024, 1, 1, 0, 0, 7, tzinfo=dt.UTC)
    assert r7["day"] == dt.date(2024, 1, 8)
    assert r7["uid"] == str(uuid.UUID(int=7))
    assert r7["tags"] == ["t7", "x"]
    assert dict(r7["attrs"]) == {"a": 7}
    assert r7["address"] == {"street": "s7", "zip": 1007}
    assert r7["note"] is None and by_id[8]["note"] == "n8"

    # v2: compatible evolution mid-stream
    ser2 = AvroSerializer(sr, json.dumps(_v2()))
    tt.produce(topic, [(str(i).encode(), ser2(_order(i, 2), ctx)) for i in range(50, 80)])
    rows = tt.wait_rows(topic, 80)
    schema = rows.schema
    assert schema.field("score").type == pa.float64()
    assert schema.field("amount").type == pa.decimal128(12, 2)
    addr = schema.field("address").type
    assert addr.field("zip").type == pa.int64()
    assert addr.field("city").type in (pa.string(), pa.large_string())
    assert "extra" in schema.names and "note" in schema.names
    by_id = {r["id"]: r for r in rows.to_pylist()}
    assert by_id[60]["extra"] == 600 and by_id[60]["note"] is None
    assert by_id[60]["address"] == {"street": "s60", "zip": 1060, "city": "c60"}
    assert by_id[7]["extra"] is None and by_id[7]["address"]["city"] is None

    # v3: incompatible (string -> int): dead letters, never in the table
    ser3 = AvroSerializer(sr, json.dumps(_v3_incompatible()))
    tt.produce(topic, [(str(i).encode(), ser3(_order(i, 3), ctx)) for i in range(80, 90)])
    tt.produce(topic, [(str(i).encode(), ser2(_order(i, 2), ctx)) for i in range(90, 95)])
    rows = tt.wait_rows(topic, 85)
    assert sorted(rows.column("id").to_pylist()) == list(range(80)) + list(range(90, 95))
    dead = consume_all(tt, f"{topic}.dlq", 10)
    assert sorted(int(m.key()) for m in dead) == list(range(80, 90))
    hdr = dict(dead[0].headers())
    assert b"incompatible" in hdr["tidelake.error"]
    assert hdr["tidelake.source.topic"] == topic.encode()
    assert rows.schema.field("name").type in (pa.string(), pa.large_string())


def consume_all(tt: TableTopics, topic: str, count: int, timeout: float = 30.0) -> list:
    import time

    c = Consumer(
        {
            "bootstrap.servers": tt.proc.bootstrap,
            "group.id": f"check-{topic}-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append(m)
        # a little longer: more than expected must fail the test
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            m = c.poll(0.3)
            if m is not None and not m.error():
                out.append(m)
    finally:
        c.close()
    return out


def test_bad_records_go_to_the_dead_letter_topic(tt: TableTopics) -> None:
    topic = "avro-bad"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.errors.dlq.topic": "avro-bad-dead",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = AvroSerializer(sr, json.dumps(ORDER_V1))
    good = [(str(i).encode(), ser(_order(i), ctx)) for i in range(40)]
    bad = [
        (b"b0", b"not avro at all"),
        (b"b1", b"\x00\x00\x00\x7f\xff" + b"\x02"),  # unknown schema id
        (b"b2", good[0][1][:8]),  # truncated body
        (b"b3", None),
    ]
    mixed = good[:10] + bad[:2] + good[10:30] + bad[2:] + good[30:]
    tt.produce(topic, mixed)
    rows = tt.wait_rows(topic, 41)
    dead = consume_all(tt, "avro-bad-dead", 3)
    assert rows.num_rows + len(dead) == len(mixed)
    assert sorted(m.key() for m in dead) == [b"b0", b"b1", b"b2"]
    assert set(rows.column("id").to_pylist()) == set(range(40)) | {None}
    for m in dead:
        assert dict(m.headers())["tidelake.error"]


TRADE = {
    "type": "record",
    "name": "Trade",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "venue", "type": "string"},
        {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["BUY", "SELL"]}},
        {"name": "fills", "type": {"type": "array", "items": "long"}},
    ],
}


def test_a_malformed_body_in_a_bulk_batch_goes_to_the_dead_letter_topic(tt: TableTopics) -> None:
    """A batch large enough for the bulk decoder, with one body whose string
    length runs past its end (polars panics on it): every good record lands
    in the table, the bad one in the dead-letter topic, and the table topic
    goes on converting."""
    topic = "avro-bulk-bad"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.errors.dlq.topic": "avro-bulk-bad-dead",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = AvroSerializer(sr, json.dumps(TRADE))

    def trade(i: int) -> dict:
        return {"id": i, "venue": f"v{i % 7}", "side": ("BUY", "SELL")[i % 2], "fills": [i] * (i % 3)}

    good = [(str(i).encode(), ser(trade(i), ctx)) for i in range(300)]
    framing = good[0][1][:5]  # magic byte and schema id
    bad = (b"bad", framing + b"\x02\xfe\xff\xff\x0fabc")  # id 1, a 16 MiB string: 3 bytes
    tt.produce(topic, good[:150] + [bad] + good[150:])
    rows = tt.wait_rows(topic, 300)
    assert sorted(rows.column("id").to_pylist()) == list(range(300))
    assert rows.column("side").to_pylist()[:2] in (["BUY", "SELL"], ["SELL", "BUY"])
    dead = consume_all(tt, "avro-bulk-bad-dead", 1)
    assert [m.key() for m in dead] == [b"bad"]
    tt.produce(topic, [(b"300", ser(trade(300), ctx))])
    assert tt.wait_rows(topic, 301).num_rows == 301
