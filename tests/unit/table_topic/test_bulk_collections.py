"""The bulk Avro decoder on enums, fixed, arrays and maps: the same Arrow arrays as
the per-record decoder, and the per-record path for bodies it cannot prove."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from table_topic.decode import avro_bulk
from table_topic.decode.avro import AvroDecoder
from tests.unit.table_topic.avro_parity import avro_bodies, bulk_equals_per_record

pytestmark = pytest.mark.skipif(not avro_bulk.bulk_available(), reason="polars is not installed")

_STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "LOST"]}
_ITEM = {
    "type": "record",
    "name": "Item",
    "fields": [
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "grade",
            "type": ["null", {"type": "enum", "name": "Grade", "symbols": ["A", "B"]}],
        },
    ],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "status", "type": _STATUS},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 8}},
        {
            "name": "price",
            "type": {
                "type": "fixed",
                "name": "Price",
                "size": 6,
                "logicalType": "decimal",
                "precision": 14,
                "scale": 2,
            },
        },
        {"name": "scores", "type": {"type": "array", "items": "long"}},
        {"name": "notes", "type": ["null", {"type": "array", "items": ["null", "string"]}]},
        {"name": "items", "type": {"type": "array", "items": _ITEM}},
        {
            "name": "matrix",
            "type": {"type": "array", "items": {"type": "array", "items": "double"}},
        },
    ],
}

_items = st.fixed_dictionaries(
    {
        "sku": st.text(max_size=8),
        "qty": st.integers(min_value=-(2**31), max_value=2**31 - 1),
        "tags": st.lists(st.text(max_size=5), max_size=3),
        "grade": st.one_of(st.none(), st.sampled_from(["A", "B"])),
    }
)
orders = st.fixed_dictionaries(
    {
        "id": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "status": st.sampled_from(_STATUS["symbols"]),
        "digest": st.binary(min_size=8, max_size=8),
        "price": st.integers(min_value=-(10**14) + 1, max_value=10**14 - 1).map(
            lambda u: Decimal(f"{u}E-2")
        ),
        # long block counts: a list of 64+ items takes a two-byte count
        "scores": st.one_of(
            st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4),
            st.lists(st.integers(min_value=0, max_value=9), min_size=64, max_size=70),
        ),
        "notes": st.one_of(
            st.none(), st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=3)
        ),
        "items": st.lists(_items, max_size=3),
        "matrix": st.lists(st.lists(st.floats(allow_nan=False), max_size=3), max_size=3),
    }
)


def _order(i: int, **over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": i,
        "status": "PAID",
        "digest": b"\x00" * 8,
        "price": Decimal("1.25"),
        "scores": [i, -i],
        "notes": None,
        "items": [{"sku": "a", "qty": 1, "tags": ["x"], "grade": "A"}],
        "matrix": [[1.5]],
    }
    row.update(over)
    return row


_PRICE = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
MAPS = {
    "type": "record",
    "name": "Maps",
    "fields": [
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "labels", "type": ["null", {"type": "map", "values": ["null", "string"]}]},
        {
            "name": "lines",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "status", "type": _STATUS},
                        {"name": "price", "type": _PRICE},
                        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                    ],
                },
            },
        },
        {"name": "per_day", "type": {"type": "array", "items": {"type": "map", "values": "int"}}},
        {"name": "nested", "type": {"type": "map", "values": {"type": "map", "values": "double"}}},
    ],
}
_keys = st.text(max_size=6)
_lines = st.fixed_dictionaries(
    {
        "status": st.sampled_from(_STATUS["symbols"]),
        "price": st.integers(min_value=-(10**9) + 1, max_value=10**9 - 1).map(
            lambda u: Decimal(f"{u}E-2")
        ),
        "at": st.datetimes(
            min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(2200, 1, 1)
        ).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=datetime.UTC)),
    }
)
maps = st.fixed_dictionaries(
    {
        # 64+ entries take a two-byte block count
        "counts": st.one_of(
            st.dictionaries(
                _keys, st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4
            ),
            st.integers(64, 70).map(lambda n: {f"k{i}": i for i in range(n)}),
        ),
        "labels": st.one_of(
            st.none(), st.dictionaries(_keys, st.one_of(st.none(), st.text(max_size=5)), max_size=3)
        ),
        "lines": st.dictionaries(_keys, _lines, max_size=3),
        "per_day": st.lists(
            st.dictionaries(_keys, st.integers(-(2**31), 2**31 - 1), max_size=3), max_size=3
        ),
        "nested": st.dictionaries(
            _keys, st.dictionaries(_keys, st.floats(allow_nan=False), max_size=2), max_size=2
        ),
    }
)


def test_enums_fixed_arrays_and_maps_are_eligible_but_unions_of_several_types_are_not() -> None:
    assert avro_bulk._eligible(AvroDecoder(1, json.dumps(ORDER)))
    assert avro_bulk._eligible(AvroDecoder(1, json.dumps(MAPS)))
    either = {"type": "map", "values": ["null", "int", "string"]}
    union_values = {**MAPS, "fields": [*MAPS["fields"], {"name": "u", "type": either}]}
    dec = AvroDecoder(1, json.dumps(union_values))
    assert not avro_bulk._eligible(dec)
    assert avro_bulk.decode_bulk(dec, [b"\x00"] * 100) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(maps, min_size=1, max_size=8), st.integers(64, 100))
def test_bulk_maps_match_the_per_record_decoder(distinct: list[dict[str, object]], n: int) -> None:
    """Maps of primitives, of nullable strings, of records with an enum, a
    decimal and a timestamp, inside an array, of maps: the bulk decoder reads
    each as the list of entries it is written as, and gives the Arrow maps
    the per-record decoder builds, entries in the order written."""
    values = [distinct[i % len(distinct)] for i in range(n)]  # the bulk path takes 64+
    bulk = bulk_equals_per_record(MAPS, values)
    got = bulk.to_pylist()
    assert [dict(r["counts"]) for r in got] == [v["counts"] for v in values]
    assert [list(dict(r["counts"])) for r in got] == [list(v["counts"]) for v in values]


def test_a_map_repeating_a_key_goes_to_the_per_record_path() -> None:
    """A body may repeat a key in one map (no writer we know of does): the
    per-record decoder keeps the last value, an Arrow map would keep both,
    so the bulk decoder refuses the batch."""
    schema = {
        "type": "record",
        "name": "M",
        "fields": [{"name": "m", "type": {"type": "map", "values": "int"}}],
    }
    dec = AvroDecoder(1, json.dumps(schema))
    bodies = avro_bodies(schema, [{"m": {"a": 1, "b": 2}}] * 100)
    assert bodies[0] == b"\x04\x02a\x02\x02b\x04\x00"
    assert avro_bulk.decode_bulk(dec, bodies) is not None
    bodies[30] = b"\x04\x02a\x02\x02a\x04\x00"  # "a": 1, then "a": 2
    assert dec.decode(bodies[30]) == {"m": {"a": 2}}
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)


@settings(max_examples=40, deadline=None)
@given(st.lists(orders, min_size=64, max_size=120))
def test_bulk_enums_fixed_and_arrays_match_the_per_record_decoder(
    values: list[dict[str, object]],
) -> None:
    bulk = bulk_equals_per_record(ORDER, values)
    assert [r["status"] for r in bulk.to_pylist()] == [v["status"] for v in values]


def test_a_wrong_enum_index_leaves_the_batch_to_the_per_record_path() -> None:
    """Index 4 of a 4-symbol enum: the batch is refused, not misread."""
    dec = AvroDecoder(1, json.dumps(ORDER))
    bodies = avro_bodies(ORDER, [_order(i) for i in range(100)])
    # the status index follows the id (zigzag varint of i, 1 byte below 64)
    assert bodies[10][1] == 2  # "PAID" is index 1: zigzag 2
    bodies[10] = bodies[10][:1] + b"\x08" + bodies[10][2:]
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)


def test_an_array_written_in_two_blocks_is_left_to_the_per_record_path() -> None:
    """Avro lets a writer split an array into blocks (or give a negative
    count and a byte size); the decoded values are the same but the size
    check cannot prove them, so the per-record decoder takes the batch."""
    schema = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "xs", "type": {"type": "array", "items": "int"}}],
    }
    dec = AvroDecoder(1, json.dumps(schema))
    canonical = avro_bodies(schema, [{"xs": [1, 2]}] * 100)
    assert canonical[0] == b"\x04\x02\x04\x00"
    bodies = list(canonical)
    bodies[7] = b"\x02\x02\x02\x04\x00"  # two blocks of one item each
    bodies[8] = b"\x03\x04\x02\x04\x00"  # a block of count -2 and 2 bytes
    assert dec.decode(bodies[7]) == dec.decode(bodies[8]) == {"xs": [1, 2]}
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)
    assert avro_bulk.decode_bulk(dec, canonical) is not None


def test_a_shifted_body_inside_an_array_is_refused() -> None:
    dec = AvroDecoder(1, json.dumps(ORDER))
    bodies = avro_bodies(ORDER, [_order(i) for i in range(100)])
    bodies[40] = bodies[40][:-1]
    bodies[41] = bodies[41] + b"\x00"
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)


def test_a_decimal_on_a_wide_fixed_goes_to_the_per_record_path() -> None:
    """decimal128 holds 16 bytes: a 17-byte fixed is decoded per record."""
    wide = {
        "type": "record",
        "name": "W",
        "fields": [
            {
                "name": "v",
                "type": {
                    "type": "fixed",
                    "name": "Wide",
                    "size": 17,
                    "logicalType": "decimal",
                    "precision": 38,
                    "scale": 0,
                },
            }
        ],
    }
    dec = AvroDecoder(1, json.dumps(wide))
    bodies = avro_bodies(wide, [{"v": Decimal(i)} for i in range(100)])
    with pytest.raises(ValueError):
        avro_bulk.decode_bulk(dec, bodies)


def test_a_union_branch_index_that_is_not_its_values_is_refused() -> None:
    """The size check cannot see a union's branch index: -2 (0x03) or 2
    (0x04) have the length of 1 (0x02). fastavro refuses such a body; the
    bulk decoder must not read it as the value, at the top level, in a
    nested record, in an array's items or in a map's values."""
    schema = {
        "type": "record",
        "name": "U",
        "fields": [
            {"name": "a", "type": ["null", "int"]},
            {"name": "b", "type": ["int", "null"]},  # the value branch first
            {
                "name": "r",
                "type": {
                    "type": "record",
                    "name": "In",
                    "fields": [{"name": "c", "type": ["null", "string"]}],
                },
            },
            {"name": "xs", "type": {"type": "array", "items": ["null", "long"]}},
            {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        ],
    }
    dec = AvroDecoder(1, json.dumps(schema))
    values = [{"a": 1, "b": 2, "r": {"c": "z"}, "xs": [None, 3], "m": {"k": None}}] * 100
    bodies = avro_bodies(schema, values)
    # at 0: a=1 02 02 | 2: b=2 (branch 0) 00 04 | 4: c="z" 02 02 7a |
    # 7: xs 04, 00, 02 06, 00 | 12: m 02, 02 6b, 00, 00 (a null value at 15)
    assert bodies[0] == bytes.fromhex("0202000402027a040002060002026b0000")
    assert avro_bulk.decode_bulk(dec, bodies) is not None
    for position, byte in (
        (0, 0x03),
        (0, 0x04),
        (2, 0x02),
        (4, 0x03),
        (9, 0x04),
        (8, 0x01),
        (15, 0x04),
    ):
        bad = bytearray(bodies[0])
        bad[position] = byte
        mangled = [*bodies[:50], bytes(bad), *bodies[51:]]
        with pytest.raises(ValueError):
            avro_bulk.decode_bulk(dec, mangled)


_ADDRESS = {
    "type": "record",
    "name": "Address",
    "fields": [
        {"name": "city", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["HOME", "WORK"]}},
        {"name": "zip", "type": {"type": "fixed", "name": "Zip", "size": 4}},
    ],
}
REFERENCES = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [
        {"name": "ship", "type": _ADDRESS},
        {"name": "bill", "type": ["null", "Address"]},  # by short name
        {"name": "kind", "type": "shop.Kind"},  # by full name
        {"name": "previous", "type": {"type": "array", "items": "Address"}},
        {"name": "zips", "type": {"type": "map", "values": "Zip"}},
    ],
}
_addresses = st.fixed_dictionaries(
    {
        "city": st.text(max_size=6),
        "kind": st.sampled_from(["HOME", "WORK"]),
        "zip": st.binary(min_size=4, max_size=4),
    }
)
customers = st.fixed_dictionaries(
    {
        "ship": _addresses,
        "bill": st.one_of(st.none(), _addresses),
        "kind": st.sampled_from(["HOME", "WORK"]),
        "previous": st.lists(_addresses, max_size=3),
        "zips": st.dictionaries(_keys, st.binary(min_size=4, max_size=4), max_size=3),
    }
)


@settings(max_examples=30, deadline=None)
@given(st.lists(customers, min_size=1, max_size=8), st.integers(64, 100))
def test_references_to_named_types_match_the_per_record_decoder(
    distinct: list[dict[str, object]], n: int
) -> None:
    """A record, an enum and a fixed defined once and used again by name (short
    or full, in a union, an array and a map): the bulk decoder reads each
    use as the type it names."""
    values = [distinct[i % len(distinct)] for i in range(n)]
    bulk = bulk_equals_per_record(REFERENCES, values)
    assert [r["bill"] for r in bulk.to_pylist()] == [v["bill"] for v in values]


def test_a_recursive_type_is_not_bulk_decodable() -> None:
    """A reference to a type from inside itself stays a name once expanded:
    such a schema never reaches polars (table topics refuse it anyway)."""
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    expanded = avro_bulk._expand(node, {})
    assert expanded is not None
    assert avro_bulk._record_kinds(expanded, 0) is None


def test_types_from_referenced_schemas_are_expanded_too() -> None:
    """A schema registered with references (Confluent's schema references)
    names types defined in other schemas: they expand from the references,
    and the batch takes the bulk path with the per-record decoder's values."""
    address = {**_ADDRESS, "namespace": "shop"}
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [
            {"name": "ship", "type": "shop.Address"},
            {"name": "bill", "type": ["null", "Address"]},
            {"name": "kinds", "type": {"type": "map", "values": "shop.Kind"}},
        ],
    }
    dec = AvroDecoder(1, json.dumps(customer), references=[json.dumps(address)])
    home = {"city": "Utrecht", "kind": "HOME", "zip": b"3511"}
    values = [
        {"ship": home, "bill": None if i % 2 else {**home, "kind": "WORK"}, "kinds": {"a": "WORK"}}
        for i in range(100)
    ]
    bodies = avro_bodies(customer, values, references=[address])
    bulk = avro_bulk.decode_bulk(dec, bodies)
    assert bulk is not None  # the bulk path, not the fallback
    assert bulk.equals(pa.array([dec.decode(b) for b in bodies], dec.arrow_type))
    assert bulk[1].as_py()["bill"] is None and bulk[0].as_py()["bill"]["kind"] == "WORK"
