"""Record conversion: Avro/JSON/Protobuf types to Arrow, metadata columns, flatten, dead letters."""

from __future__ import annotations

import io
import json
import struct
import time
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from ingest.log.topic_config import TopicConfigRegistry
from ingest.protocol.records import Record
from table_topic.config import TableTopicConfig, register_table_topic_configs
from table_topic.convert.chunk import convert_records
from table_topic.convert.conform import conform_table
from table_topic.decode.avro import AvroDecoder, avro_to_arrow
from table_topic.decode.jsonschema import json_schema_to_arrow
from table_topic.decode.resolver import SchemaResolver

SCHEMA = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "s", "type": ["null", "string"], "default": None},
        {
            "name": "d",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
        },
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "int"}}},
        {"name": "u", "type": ["null", "int", "string"], "default": None},
    ],
}


class FakeRegistry:
    def __init__(self, schemas: dict[int, dict[str, Any]]) -> None:
        self.schemas = schemas

    def get_schema(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]:
        if schema_id not in self.schemas:
            raise type("SchemaNotFound", (Exception,), {})(f"{schema_id}")
        return self.schemas[schema_id]

    def get_version(
        self, subject: str, version: Any, deleted: bool = False, fmt: str | None = None
    ) -> dict[str, Any]:
        sid = max(self.schemas)
        return {"subject": subject, "version": 1, "id": sid, **self.schemas[sid]}


def cfg(**overrides: str) -> TableTopicConfig:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    return TableTopicConfig.from_topic_config("t", reg.resolved(reg.validate(overrides)))


def avro_payload(schema: dict[str, Any], value: dict[str, Any], sid: int = 1) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return b"\x00" + struct.pack(">I", sid) + buf.getvalue()


def rec(offset: int, value: bytes | None, key: bytes | None = None, headers: tuple = ()) -> Record:
    return Record(offset, 1_700_000_000_000 + offset, key, value, headers)


def test_avro_schema_maps_to_arrow() -> None:
    t = avro_to_arrow(SCHEMA)
    assert t.field("id").type == pa.int64()
    assert t.field("d").type == pa.decimal128(9, 3)
    assert t.field("t").type == pa.timestamp("us", tz="UTC")
    assert t.field("e").type == pa.string()
    assert t.field("f").type == pa.binary(4)
    assert t.field("m").type == pa.map_(pa.string(), pa.list_(pa.int32()))
    assert t.field("u").type == pa.struct([("int", pa.int32()), ("string", pa.string())])


def test_recursive_avro_types_are_refused() -> None:
    from table_topic.errors import TableTopicError

    node = {"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]}
    with pytest.raises(TableTopicError):
        avro_to_arrow(node)


def test_flat_avro_values_become_columns_with_metadata() -> None:
    import datetime as dt
    import decimal

    registry = FakeRegistry({1: {"schema": json.dumps(SCHEMA)}})
    value = {
        "id": 5,
        "s": "x",
        "d": decimal.Decimal("1.500"),
        "t": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "e": "B",
        "f": b"abcd",
        "m": {"k": [1, 2]},
        "u": 3,
    }
    recs = [rec(10, avro_payload(SCHEMA, value), b"key", (("h", b"v"), ("h", b"w")))]
    chunk = convert_records(
        2,
        recs,
        10,
        11,
        cfg(
            **{
                "table.topic.convert.value.type": "by_schema_id",
                "table.topic.transform.value.type": "flatten",
            }
        ),
        SchemaResolver(registry),
    )
    assert not chunk.dead and chunk.rows == 1
    row = chunk.tables[0].to_pylist()[0]
    assert (
        row["_kafka_partition"] == 2 and row["_kafka_offset"] == 10 and row["_kafka_key"] == b"key"
    )
    assert row["_kafka_headers"] == [{"key": "h", "value": b"v"}, {"key": "h", "value": b"w"}]
    assert row["id"] == 5 and row["d"] == decimal.Decimal("1.500") and row["e"] == "B"
    assert row["m"] == [("k", [1, 2])]
    assert row["u"] == {"int": 3, "string": None}


def test_bad_payloads_are_dead_letters_and_the_rest_converts() -> None:
    registry = FakeRegistry({1: {"schema": json.dumps(SCHEMA)}})
    good = {"id": 1, "s": None, "d": b"\x01", "t": 0, "e": "A", "f": b"abcd", "m": {}, "u": None}
    recs = [
        rec(0, avro_payload(SCHEMA, good)),
        rec(1, b"garbage"),
        rec(2, b"\x00\x00\x00\x00\x09" + b"\x02"),  # unknown id 9
        rec(3, avro_payload(SCHEMA, good)[:-3]),  # truncated
        rec(4, avro_payload(SCHEMA, good) + b"\x00"),  # trailing bytes
        rec(5, avro_payload(SCHEMA, good)),
    ]
    c = cfg(**{"table.topic.convert.value.type": "by_schema_id"})
    chunk = convert_records(0, recs, 0, 6, c, SchemaResolver(registry))
    assert chunk.rows == 2
    assert [d.offset for d in chunk.dead] == [1, 2, 3, 4]
    assert chunk.tables[0].column("_kafka_offset").to_pylist() == [0, 5]


def test_errors_tolerance_none_stops_before_the_bad_record() -> None:
    c = cfg(**{"table.topic.convert.value.type": "string", "table.topic.errors.tolerance": "none"})
    recs = [rec(0, b"ok"), rec(1, b"\xff\xfe"), rec(2, b"ok")]
    chunk = convert_records(0, recs, 0, 3, c, SchemaResolver(None))
    assert chunk.rows == 1 and chunk.next_offset == 1 and chunk.fatal and not chunk.dead


def test_schema_changes_make_separate_tables_in_order() -> None:
    v2 = json.loads(json.dumps(SCHEMA))
    v2["fields"].append({"name": "extra", "type": ["null", "long"], "default": None})
    registry = FakeRegistry({1: {"schema": json.dumps(SCHEMA)}, 2: {"schema": json.dumps(v2)}})
    good = {"id": 1, "s": None, "d": b"\x01", "t": 0, "e": "A", "f": b"abcd", "m": {}, "u": None}
    recs = [
        rec(0, avro_payload(SCHEMA, good, 1)),
        rec(1, avro_payload(v2, {**good, "extra": 7}, 2)),
        rec(2, avro_payload(SCHEMA, good, 1)),
    ]
    c = cfg(
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        }
    )
    chunk = convert_records(0, recs, 0, 3, c, SchemaResolver(registry))
    assert [t.num_rows for t in chunk.tables] == [1, 1, 1]
    assert "extra" in chunk.tables[1].column_names and "extra" not in chunk.tables[0].column_names


def test_json_schema_types() -> None:
    t = json_schema_to_arrow(
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": ["null", "number"]},
                "c": {"type": "object", "additionalProperties": {"type": "string"}},
                "d": {"type": "string", "format": "date"},
                "e": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
        }
    )
    assert t.field("a").type == pa.int64()
    assert t.field("b").type == pa.float64()
    assert t.field("c").type == pa.map_(pa.string(), pa.string())
    assert t.field("d").type == pa.date32()
    assert t.field("e").type == pa.string()


def test_conform_fills_missing_and_widens() -> None:
    src = pa.table(
        {
            "a": pa.array([1, 2], pa.int32()),
            "s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int32())])),
            "l": pa.array([[{"x": 1}], []], pa.list_(pa.struct([("x", pa.int32())]))),
        }
    )
    target = pa.schema(
        [
            ("a", pa.int64()),
            ("gone", pa.string()),
            ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])),
            ("l", pa.list_(pa.struct([("x", pa.int64()), ("z", pa.float64())]))),
        ]
    )
    out = conform_table(src, target)
    assert out.schema == target
    assert out.to_pylist() == [
        {"a": 1, "gone": None, "s": {"x": 1, "y": None}, "l": [{"x": 1, "z": None}]},
        {"a": 2, "gone": None, "s": None, "l": []},
    ]


def test_bulk_avro_decoder_matches_fastavro() -> None:
    from table_topic.decode.avro_bulk import bulk_available

    assert bulk_available(), "polars is a dependency: the bulk Avro path must be available"
    flat = {
        "type": "record",
        "name": "F",
        "fields": [
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "s", "type": ["null", "string"]},
            {"name": "b", "type": "boolean"},
            {"name": "d", "type": "double"},
        ],
    }
    dec = AvroDecoder(1, json.dumps(flat))
    values = [
        {"i": i, "l": i * 10**10, "s": None if i % 3 else f"s{i}", "b": i % 2 == 0, "d": i / 3}
        for i in range(500)
    ]
    bodies = [avro_payload(flat, v)[5:] for v in values]
    arr = dec.decode_column(bodies)
    assert arr is not None
    assert arr.to_pylist() == values


def test_bulk_avro_decoder_takes_int_and_long_logical_types() -> None:
    import datetime as dt
    import uuid as uuidlib

    from table_topic.decode import avro_bulk

    logical = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "tick", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        ],
    }
    dec = AvroDecoder(1, json.dumps(logical))
    assert avro_bulk._eligible(dec)
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    values = [
        {
            "id": i,
            "placed": base + dt.timedelta(milliseconds=7 * i),
            "seen": None if i % 4 == 0 else base + dt.timedelta(microseconds=13 * i),
            "local": dt.datetime(2026, 1, 1) + dt.timedelta(seconds=i),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=i),
            "at": dt.time(10, 0, i % 60, (i % 1000) * 1000),
            "tick": dt.time(0, 0, 0, i),
            "ref": str(uuidlib.UUID(int=i)),
        }
        for i in range(300)
    ]
    bodies = [avro_payload(logical, v)[5:] for v in values]
    bulk = avro_bulk.decode_bulk(dec, bodies)
    assert bulk is not None  # the bulk path, not the fallback
    slow = pa.array([dec.decode(b) for b in bodies], dec.arrow_type)
    assert bulk.type == dec.arrow_type
    assert bulk.to_pylist() == slow.to_pylist()
    assert bulk.field("placed")[3].as_py() == base + dt.timedelta(milliseconds=21)


def test_chunk_conversion_is_fast_enough_for_strings() -> None:
    c = cfg(**{"table.topic.convert.value.type": "string"})
    recs = [rec(i, b"v%d" % i) for i in range(20000)]
    t0 = time.perf_counter()
    chunk = convert_records(0, recs, 0, 20000, c, SchemaResolver(None))
    assert chunk.rows == 20000
    assert time.perf_counter() - t0 < 5


def test_vectorised_path_matches_the_general_path() -> None:
    import gzip

    from ingest.protocol.records import build_batch, split_batches
    from table_topic.convert.chunk import convert_columns
    from table_topic.convert.records import read_columns
    from table_topic.convert.vector import convert_vectorised
    from table_topic.decode.avro_bulk import bulk_available

    assert bulk_available(), "polars is a dependency: the bulk Avro path must be available"
    flat = {
        "type": "record",
        "name": "F",
        "fields": [{"name": "i", "type": "long"}, {"name": "s", "type": ["null", "string"]}],
    }
    registry = FakeRegistry({3: {"schema": json.dumps(flat)}})
    batches = []
    offset = 0
    for b in range(3):
        recs = [
            (
                None if i % 4 == 0 else b"k%d" % i,
                avro_payload(flat, {"i": offset + i, "s": None if i % 3 else "x" * i}, 3),
                [],
                1_700_000_000_000 + i * 1000,
            )
            for i in range(200)
        ]
        raw = build_batch(recs, base_offset=offset)
        if b == 1:  # a gzip-compressed batch
            body = gzip.compress(raw[61:])
            import struct as st

            import crc32c

            head = bytearray(raw[:61])
            st.pack_into(">i", head, 8, 61 - 12 + len(body))
            st.pack_into(">h", head, 21, 1)
            out = bytes(head) + body
            out = out[:17] + st.pack(">I", crc32c.crc32c(out[21:])) + out[21:]
            raw = out
        batches.append((raw, split_batches(memoryview(raw))[0]))
        offset += 200
    c = cfg(
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        }
    )
    fast = convert_vectorised(0, batches, 50, 600, c, SchemaResolver(registry))
    slow = convert_columns(0, read_columns(batches, 50), 50, 600, c, SchemaResolver(registry))
    assert fast is not None and fast.rows == slow.rows == 550
    assert fast.tables[0].equals(slow.tables[0])
    # a malformed body anywhere sends the chunk to the general path
    bad = build_batch([(None, avro_payload(flat, {"i": 1, "s": "a"}, 3) + b"\x02", [], 0)] * 100)
    assert (
        convert_vectorised(
            0, [(bad, split_batches(memoryview(bad))[0])], 0, 100, c, SchemaResolver(registry)
        )
        is None
    )
