"""The bulk Avro decoder on mangled bodies: it returns exactly what the
per-record decoder returns, or raises ValueError (the table topic then
decodes the batch per record, which sends the bad records to the dead-letter
topic). Nothing else may escape: polars answers some bodies with a Rust panic."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from table_topic.decode import avro_bulk
from table_topic.decode.avro import AvroDecoder
from tests.fuzz.conftest import fuzz_settings
from tests.unit.table_topic.avro_parity import avro_bodies
from tests.unit.table_topic.test_bulk_collections import MAPS, ORDER, _order

pytestmark = pytest.mark.skipif(not avro_bulk.bulk_available(), reason="polars is not installed")

_DECODER = AvroDecoder(1, json.dumps(ORDER))
_BODIES = avro_bodies(ORDER, [_order(i, notes=["a", None]) for i in range(80)])
_MAP_DECODER = AvroDecoder(1, json.dumps(MAPS))
_MAP_BODIES = avro_bodies(
    MAPS,
    [
        {
            "counts": {f"k{j}": i * j for j in range(i % 4)},
            "labels": None if i % 3 == 0 else {"a": None, "b": "x" * (i % 5)},
            "lines": {},
            "per_day": [{"mon": i}, {}] if i % 2 else [],
            "nested": {"n": {"v": i / 2}} if i % 2 else {},
        }
        for i in range(80)
    ],
)


@st.composite
def mangled(draw: st.DrawFn, originals: list[bytes] = _BODIES) -> list[bytes]:
    bodies = list(originals)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(bodies) - 1))
        body = bytearray(bodies[i])
        op = draw(st.sampled_from(["flip", "cut", "grow", "replace"]))
        if op == "flip" and body:
            k = draw(st.integers(min_value=0, max_value=len(body) - 1))
            body[k] = draw(st.integers(min_value=0, max_value=255))
        elif op == "cut":
            del body[draw(st.integers(min_value=0, max_value=len(body))) :]
        elif op == "grow":
            body += draw(st.binary(min_size=1, max_size=8))
        else:
            body = bytearray(draw(st.binary(max_size=40)))
        bodies[i] = bytes(body)
    return bodies


def _same(bulk: pa.Array, slow: pa.Array) -> bool:
    """Equal arrays, a NaN equal to a NaN (a flipped byte of a double can
    make one; Arrow's equals says NaN != NaN)."""

    def plain(v: object) -> object:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    return bool(bulk.type == slow.type) and plain(bulk.to_pylist()) == plain(slow.to_pylist())


_CASES = {"order": (_DECODER, _BODIES), "maps": (_MAP_DECODER, _MAP_BODIES)}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_mangled_bodies_decode_as_per_record_or_raise_value_error(case: str) -> None:
    """On the map schema too: maps are read as lists of entries, and a body
    shifted into or out of a map's block, or a repeated key, must not slip
    through either."""
    decoder, originals = _CASES[case]

    @fuzz_settings(150)
    @given(mangled(originals))
    def run(bodies: list[bytes]) -> None:
        try:
            bulk = avro_bulk.decode_bulk(decoder, bodies)
        except ValueError:
            return
        assert bulk is not None
        # accepted: then every body decodes per record, to the same values
        slow = pa.array([decoder.decode(b) for b in bodies], decoder.arrow_type)
        assert _same(bulk, slow)

    run()
