"""Avro bodies -> one Arrow column: the bulk decoder against per-record fastavro.

    python -m bench.avro_decode_bench [--records 200000] [--rounds 3]

Four schemas, each decoded both ways in the same run:

- ``primitives``: long, int, string, nullable string, double, boolean;
- ``decimals``: the same with two bytes-backed decimals (one nullable);
- ``nested``: three primitives, a nested record and a nullable nested record
  with a timestamp;
- ``collections``: three primitives, an enum, a fixed, an array of longs, a
  nullable array of strings and an array of records holding an enum;
- ``maps``: three primitives, a map of strings, a nullable map of longs and a
  map of records holding a timestamp.

Decimals and nested records took the per-record path until session 12;
enums, fixed and arrays until session 13; maps until session 15.

The bulk path (``table_topic.decode.avro_bulk.decode_bulk``) wraps the bodies
in an Avro container, reads it with polars and converts in Arrow; the baseline
decodes each body with fastavro and builds the Arrow array from the values
(what the table topic does for a schema the bulk path does not take). Both
results are compared. Prints records/s (median of ``--rounds``) and writes
JSON to ``bench/results/avro_decode_bench.json``.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from table_topic.decode.avro import AvroDecoder  # noqa: E402
from table_topic.decode.avro_bulk import decode_bulk  # noqa: E402

_BASE = [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "sku", "type": "string"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "weight", "type": "double"},
    {"name": "ok", "type": "boolean"},
]
_DEC = {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}
SCHEMAS: dict[str, dict[str, Any]] = {
    "primitives": {"type": "record", "name": "P", "fields": _BASE},
    "decimals": {
        "type": "record",
        "name": "D",
        "fields": [
            *_BASE,
            {"name": "price", "type": _DEC},
            {"name": "discount", "type": ["null", _DEC]},
        ],
    },
    "nested": {
        "type": "record",
        "name": "N",
        "fields": [
            *_BASE[:3],
            {
                "name": "venue",
                "type": {
                    "type": "record",
                    "name": "Venue",
                    "fields": [
                        {"name": "code", "type": "string"},
                        {"name": "lane", "type": "int"},
                    ],
                },
            },
            {
                "name": "fill",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Fill",
                        "fields": [
                            {"name": "price", "type": "double"},
                            {
                                "name": "at",
                                "type": {"type": "long", "logicalType": "timestamp-millis"},
                            },
                        ],
                    },
                ],
            },
        ],
    },
    "collections": {
        "type": "record",
        "name": "C",
        "fields": [
            *_BASE[:3],
            {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["BUY", "SELL"]}},
            {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 8}},
            {"name": "fills", "type": {"type": "array", "items": "long"}},
            {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
            {
                "name": "legs",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Leg",
                        "fields": [
                            {"name": "venue", "type": "string"},
                            {
                                "name": "kind",
                                "type": {
                                    "type": "enum",
                                    "name": "Kind",
                                    "symbols": ["LIMIT", "MARKET", "STOP"],
                                },
                            },
                        ],
                    },
                },
            },
        ],
    },
    "maps": {
        "type": "record",
        "name": "M",
        "fields": [
            *_BASE[:3],
            {"name": "attrs", "type": {"type": "map", "values": "string"}},
            {"name": "counters", "type": ["null", {"type": "map", "values": "long"}]},
            {
                "name": "seen",
                "type": {
                    "type": "map",
                    "values": {
                        "type": "record",
                        "name": "Seen",
                        "fields": [
                            {"name": "hits", "type": "int"},
                            {
                                "name": "at",
                                "type": {"type": "long", "logicalType": "timestamp-millis"},
                            },
                        ],
                    },
                },
            },
        ],
    },
}


_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _row(i: int, schema: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": i,
        "qty": i % 1000,
        "sku": f"sku-{i % 5000}",
        "note": None if i % 3 else f"note {i}",
        "weight": i / 7,
        "ok": i % 2 == 0,
    }
    if schema == "decimals":
        row["price"] = Decimal(f"{(i * 7919) % 10**9 - 5 * 10**8}E-2")
        row["discount"] = None if i % 4 == 0 else Decimal(f"{i % 10_000}E-2")
    if schema == "nested":
        row["venue"] = {"code": f"X{i % 40}", "lane": i % 8}
        at = _EPOCH + datetime.timedelta(milliseconds=i)
        row["fill"] = None if i % 5 == 0 else {"price": i / 3, "at": at}
    if schema == "collections":
        row["side"] = "BUY" if i % 3 else "SELL"
        row["digest"] = (i * 2654435761 % 2**64).to_bytes(8, "big")
        row["fills"] = [i, i * 3][: i % 3]
        row["tags"] = None if i % 4 == 0 else [f"t{i % 7}", "hot"][: 1 + i % 2]
        row["legs"] = [{"venue": f"V{i % 9}", "kind": ("LIMIT", "MARKET", "STOP")[i % 3]}] * (i % 3)
    if schema == "maps":
        row["attrs"] = {"country": ("NL", "DE", "FR")[i % 3], "device": "ios", "plan": f"p{i % 4}"}
        row["counters"] = None if i % 4 == 0 else {"clicks": i % 17, "views": i % 91}
        at = _EPOCH + datetime.timedelta(milliseconds=i)
        row["seen"] = {f"page{j}": {"hits": i % 50 + j, "at": at} for j in range(i % 3)}
    return row


def _bodies(name: str, schema: dict[str, Any], n: int) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for i in range(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, _row(i, name))
        out.append(buf.getvalue())
    return out


def _time(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench/results/avro_decode_bench.json")
    args = ap.parse_args()
    results: dict[str, Any] = {"records": args.records, "rounds": args.rounds, "schemas": {}}
    for name, schema in SCHEMAS.items():
        dec = AvroDecoder(1, json.dumps(schema))
        bodies = _bodies(name, schema, args.records)
        bulk_s, slow_s = [], []
        same = True
        for _ in range(args.rounds):
            t, bulk = _time(lambda: decode_bulk(dec, bodies))  # noqa: B023
            if bulk is None:
                raise SystemExit(f"{name}: the bulk decoder did not take this schema")
            bulk_s.append(t)
            t, slow = _time(lambda: pa.array([dec.decode(b) for b in bodies], dec.arrow_type))  # noqa: B023
            slow_s.append(t)
            same = same and bulk.equals(slow)
        bulk_rate = args.records / statistics.median(bulk_s)
        slow_rate = args.records / statistics.median(slow_s)
        results["schemas"][name] = {
            "bulk_records_per_s": round(bulk_rate),
            "per_record_records_per_s": round(slow_rate),
            "speedup": round(bulk_rate / slow_rate, 2),
            "bulk_s": bulk_s,
            "per_record_s": slow_s,
            "same_result": same,
        }
    print(f"{'schema':<12}{'bulk rec/s':>14}{'per-record rec/s':>18}{'speedup':>10}{'same':>7}")
    for name, r in results["schemas"].items():
        print(
            f"{name:<12}{r['bulk_records_per_s']:>14,}{r['per_record_records_per_s']:>18,}"
            f"{r['speedup']:>9}x{r['same_result']!s:>7}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
