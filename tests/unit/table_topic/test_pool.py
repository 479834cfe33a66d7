"""Conversion in worker processes asks the parent for registry answers and gives the thread result."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from ingest.protocol.records import build_batch, split_batches
from table_topic.convert.chunk import convert_batches
from table_topic.convert.pool import ProcessConverter
from table_topic.decode.resolver import SchemaResolver
from tests.unit.table_topic.test_convert import SCHEMA, FakeRegistry, avro_payload, cfg


async def test_process_conversion_matches_thread_conversion() -> None:
    registry = FakeRegistry({1: {"schema": json.dumps(SCHEMA)}})
    good = {
        "id": 1,
        "s": "x",
        "d": b"\x01",
        "t": 0,
        "e": "A",
        "f": b"abcd",
        "m": {"k": [1]},
        "u": "z",
    }
    now = int(time.time() * 1000)
    raw = build_batch(
        [(None, avro_payload(SCHEMA, {**good, "id": i}), [], now) for i in range(100)]
        + [(None, b"\x00\x00\x00\x00\x05xx", [], now), (None, b"junk", [], now)]
    )
    batches = [(raw, split_batches(memoryview(raw))[0])]
    c = cfg(
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        }
    )
    expected = convert_batches(0, batches, 0, 102, c, SchemaResolver(registry))
    with ThreadPoolExecutor(1) as lookups:
        conv = ProcessConverter(1, registry, lookups)
        try:
            got = await conv.convert(0, batches, 0, 102, c)
        finally:
            conv.shutdown()
    assert got.rows == expected.rows == 100
    assert [d.offset for d in got.dead] == [d.offset for d in expected.dead] == [100, 101]
    assert got.tables[0].equals(expected.tables[0])
