"""Shared by the bulk Avro decoder's tests: encode bodies with fastavro and
check that the bulk decoder (never its fallback) gives what the per-record
decoder gives."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import fastavro
import pyarrow as pa


def avro_bodies(
    schema: dict[str, object],
    values: list[dict[str, object]],
    references: Sequence[dict[str, object]] = (),
) -> list[bytes]:
    """Schemaless bodies of ``values``; ``references``: schemas whose named
    types ``schema`` uses, dependencies first."""
    named: dict[str, object] = {}
    for ref in references:
        fastavro.parse_schema(ref, named_schemas=named)
    parsed = fastavro.parse_schema(schema, named_schemas=named)
    bodies = []
    for v in values:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, v)
        bodies.append(buf.getvalue())
    return bodies


def bulk_equals_per_record(schema: dict[str, object], values: list[dict[str, object]]) -> pa.Array:
    """Both decoders over the same bodies: the bulk result (never the
    fallback) equals what fastavro's per-record path builds."""
    from table_topic.decode import avro_bulk
    from table_topic.decode.avro import AvroDecoder

    dec = AvroDecoder(1, json.dumps(schema))
    assert avro_bulk._eligible(dec)
    bodies = avro_bodies(schema, values)
    bulk = avro_bulk.decode_bulk(dec, bodies)
    assert bulk is not None  # the bulk path, not the fallback
    slow = pa.array([dec.decode(b) for b in bodies], dec.arrow_type)
    assert bulk.type == dec.arrow_type
    assert bulk.equals(slow)
    return bulk
