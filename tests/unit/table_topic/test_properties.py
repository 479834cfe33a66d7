"""Property tests: the columnar record parser and the vectorised path agree with the references."""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from decimal import Decimal

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.protocol.records import build_batch, decode_records, split_batches
from table_topic.convert.chunk import convert_columns
from table_topic.convert.records import read_columns
from table_topic.convert.vector import convert_vectorised
from table_topic.decode.avro_bulk import bulk_available
from table_topic.decode.resolver import SchemaResolver
from tests.unit.table_topic.avro_parity import avro_bodies, bulk_equals_per_record
from tests.unit.table_topic.test_convert import FakeRegistry, cfg

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(
    st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
records = st.lists(
    st.tuples(blobs, blobs, headers, st.integers(min_value=0, max_value=2**41)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(records, st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=45))
def test_columnar_parser_matches_decode_records(recs: list, base: int, skip: int) -> None:
    raw = build_batch([(k, v, list(h), ts) for k, v, h, ts in recs], base_offset=base)
    h = split_batches(memoryview(raw))[0]
    expected = [r for r in decode_records(raw, h) if r.offset >= base + skip]
    cols = read_columns([(raw, h)], base + skip)
    assert [cols.record(i) for i in range(len(cols))] == expected


FLAT = {
    "type": "record",
    "name": "P",
    "fields": [
        {"name": "a", "type": "long"},
        {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": "int"},
        {"name": "d", "type": "double"},
        {"name": "e", "type": "boolean"},
        {"name": "f", "type": ["null", "bytes"]},
    ],
}
rows = st.fixed_dictionaries(
    {
        "a": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "b": st.one_of(st.none(), st.text(max_size=30)),
        "c": st.integers(min_value=-(2**31), max_value=2**31 - 1),
        "d": st.floats(allow_nan=False),
        "e": st.booleans(),
        "f": st.one_of(st.none(), st.binary(max_size=30)),
    }
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(rows, min_size=1, max_size=120),
    st.lists(st.one_of(st.none(), st.binary(max_size=8)), min_size=1),
)
def test_vectorised_path_matches_general_path(values: list, keys: list) -> None:
    if not bulk_available():
        return
    parsed = fastavro.parse_schema(FLAT)
    payloads = []
    for v in values:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, v)
        payloads.append(b"\x00" + struct.pack(">I", 4) + buf.getvalue())
    raw = build_batch(
        [(keys[i % len(keys)], p, [], 1000 + i) for i, p in enumerate(payloads)], base_offset=7
    )
    batches = [(raw, split_batches(memoryview(raw))[0])]
    c = cfg(
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        }
    )
    registry = FakeRegistry({4: {"schema": json.dumps(FLAT)}})
    fast = convert_vectorised(0, batches, 7, 7 + len(values), c, SchemaResolver(registry))
    slow = convert_columns(
        0, read_columns(batches, 7), 7, 7 + len(values), c, SchemaResolver(registry)
    )
    assert not slow.dead
    if fast is None:  # too few rows for the bulk decoder
        assert len(values) < 64
        return
    assert fast.tables[0].equals(slow.tables[0])


def _decimal_schema(precision: int, scale: int) -> dict[str, object]:
    dec = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    return {
        "type": "record",
        "name": "D",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": dec},
            {"name": "maybe", "type": ["null", dec]},
        ],
    }


@st.composite
def decimal_rows(draw: st.DrawFn) -> tuple[int, int, list[dict[str, object]]]:
    precision = draw(st.integers(min_value=1, max_value=38))
    scale = draw(st.integers(min_value=0, max_value=precision))
    limit = 10**precision - 1
    unscaled = st.one_of(
        st.integers(min_value=-limit, max_value=limit),
        st.sampled_from([0, -1, 1, limit, -limit, 127, 128, -128, -129, 255, 256]).filter(
            lambda v: abs(v) <= limit
        ),
    )
    values = draw(
        st.lists(st.tuples(unscaled, st.one_of(st.none(), unscaled)), min_size=64, max_size=150)
    )
    return (
        precision,
        scale,
        [
            {
                "id": i,
                "amount": Decimal(f"{a}E-{scale}"),
                "maybe": None if m is None else Decimal(f"{m}E-{scale}"),
            }
            for i, (a, m) in enumerate(values)
        ],
    )


@settings(max_examples=60, deadline=None)
@given(decimal_rows())
def test_bulk_decimals_match_the_per_record_decoder(case: tuple[int, int, list]) -> None:
    precision, scale, values = case
    bulk = bulk_equals_per_record(_decimal_schema(precision, scale), values)
    assert bulk.to_pylist() == values


@pytest.mark.parametrize(
    "raw",
    [
        (10**4).to_bytes(2, "big", signed=True),  # past precision 4
        (-(10**4)).to_bytes(2, "big", signed=True),
        b"\x00" * 17,  # wider than decimal128 holds
    ],
)
def test_bulk_decimals_leave_values_they_cannot_hold_to_the_per_record_path(raw: bytes) -> None:
    from table_topic.decode import avro_bulk
    from table_topic.decode.avro import AvroDecoder

    schema = _decimal_schema(4, 2)
    dec = AvroDecoder(1, json.dumps(schema))
    # the same wire layout, written with the decimals as plain bytes
    wire = {**schema, "fields": [{**f, "type": "bytes"} for f in schema["fields"][1:2]]}
    wire["fields"] = [
        schema["fields"][0],
        *wire["fields"],
        {"name": "maybe", "type": ["null", "bytes"]},
    ]
    rows = [
        {"id": i, "amount": raw if i == 50 else i.to_bytes(1, "big"), "maybe": None}
        for i in range(100)
    ]
    bodies = avro_bodies(wire, rows)
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)


_ADDRESS = {
    "type": "record",
    "name": "Address",
    "fields": [
        {"name": "street", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "zip", "type": ["null", "int"]},
        {
            "name": "geo",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Geo",
                    "fields": [
                        {"name": "lat", "type": "double"},
                        {"name": "lon", "type": "double"},
                        {
                            "name": "seen",
                            "type": {"type": "long", "logicalType": "timestamp-micros"},
                        },
                    ],
                },
            ],
        },
    ],
}
NESTED = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship_to", "type": _ADDRESS},
        {
            "name": "bill_to",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Billing",
                    "fields": [
                        {"name": "name", "type": "string"},
                        {
                            "name": "total",
                            "type": {
                                "type": "bytes",
                                "logicalType": "decimal",
                                "precision": 12,
                                "scale": 2,
                            },
                        },
                        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                    ],
                },
            ],
        },
        {"name": "ok", "type": "boolean"},
    ],
}

_geo = st.fixed_dictionaries(
    {
        "lat": st.floats(allow_nan=False),
        "lon": st.floats(allow_nan=False),
        "seen": st.datetimes(
            min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1)
        ).map(lambda d: d.replace(tzinfo=dt.UTC)),
    }
)
nested_rows = st.fixed_dictionaries(
    {
        "id": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "ship_to": st.fixed_dictionaries(
            {
                "street": st.text(max_size=20),
                "zip": st.one_of(st.none(), st.integers(min_value=-(2**31), max_value=2**31 - 1)),
                "geo": st.one_of(st.none(), _geo),
            }
        ),
        "bill_to": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=20),
                    "total": st.integers(min_value=-(10**12) + 1, max_value=10**12 - 1).map(
                        lambda u: Decimal(f"{u}E-2")
                    ),
                    "day": st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1)),
                }
            ),
        ),
        "ok": st.booleans(),
    }
)


@settings(max_examples=40, deadline=None)
@given(st.lists(nested_rows, min_size=64, max_size=150))
def test_bulk_nested_records_match_the_per_record_decoder(values: list[dict[str, object]]) -> None:
    bulk_equals_per_record(NESTED, values)


def test_bulk_nested_records_refuse_a_shifted_body() -> None:
    """A body one byte short inside a nested record: the sizes no longer
    match, so the batch goes to the per-record path."""
    from table_topic.decode import avro_bulk
    from table_topic.decode.avro import AvroDecoder

    dec = AvroDecoder(1, json.dumps(NESTED))
    value = {
        "id": 1,
        "ship_to": {"street": "x", "zip": None, "geo": None},
        "bill_to": None,
        "ok": True,
    }
    bodies = avro_bodies(NESTED, [value] * 100)
    bodies[40] = bodies[40][:-1]
    bodies[41] = bodies[41] + b"\x01"
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)
