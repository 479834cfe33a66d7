"""The C encoder of an object's data section (``_objencode.c``) against the
Python encoder it replaces on the upload and compaction paths: the same
bytes and index for any ranges, the same refusals."""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.s3stream.api import StreamBatch
from ingest.s3stream.objects import format as fmt
from ingest.s3stream.objects import iter_batches

from .test_object_format import stream_ranges


@pytest.fixture(autouse=True)
def _built() -> None:
    assert fmt._NATIVE is not None, "ingest.s3stream.objects._objencode is not built"


def _python(ranges: list[list[StreamBatch]]) -> tuple[bytes, list[fmt.IndexEntry]]:
    buffers, index = fmt.encode(ranges)
    return bytes(fmt.concat(buffers)), index


@settings(max_examples=200, deadline=None)
@given(ranges=stream_ranges(), empties=st.lists(st.integers(0, 5), max_size=3))
def test_the_c_encoder_writes_the_python_encoders_bytes(
    ranges: list[list[StreamBatch]], empties: list[int]
) -> None:
    for at in empties:  # empty ranges are skipped by both
        ranges.insert(min(at, len(ranges)), [])
    body, index = fmt.encode_object(ranges)
    want_body, want_index = _python(ranges)
    assert isinstance(body, bytearray)
    assert bytes(body) == want_body
    assert index == want_index
    # and it reads back, CRCs verified, from the index it wrote
    view = memoryview(body)
    got = [
        (b.stream_id, b.base_offset, b.count, bytes(b.payload))
        for e in fmt.decode_index(view, object_size=len(body))
        for b in iter_batches(e.stream_id, view[e.position : e.position + e.length])
    ]
    want = [(b.stream_id, b.base_offset, b.count, bytes(b.payload)) for r in ranges for b in r]
    assert got == want


def test_payloads_of_every_buffer_kind_and_large_ones() -> None:
    big = os.urandom(3 << 20)
    ranges = [
        [
            StreamBatch(7, 0, 5, big),
            StreamBatch(7, 5, 1, memoryview(bytearray(b"abc"))),
            StreamBatch(7, 6, 2, memoryview(big)[100:5000]),
            StreamBatch(7, 8, 1, b""),
        ],
        [StreamBatch(9, 2**40, 2**31 - 1, b"z" * 10)],
    ]
    body, index = fmt.encode_object(ranges)
    assert (bytes(body), index) == _python(ranges)


@pytest.mark.parametrize(
    "ranges",
    [
        [[StreamBatch(1, 0, 2, b"a"), StreamBatch(1, 3, 1, b"b")]],  # a gap
        [[StreamBatch(1, 0, 2, b"a"), StreamBatch(2, 2, 1, b"b")]],  # two streams in one range
    ],
)
def test_non_contiguous_batches_are_refused_as_the_python_encoder_refuses(
    ranges: list[list[StreamBatch]],
) -> None:
    with pytest.raises(ValueError, match="contiguous"):
        fmt.encode(ranges)
    with pytest.raises(ValueError, match="contiguous"):
        fmt.encode_object(ranges)


def test_a_count_beyond_int32_is_refused() -> None:
    with pytest.raises(OverflowError):
        fmt.encode_object([[StreamBatch(1, 0, 2**31, b"a")]])


@given(data=st.binary(max_size=600), skip=st.integers(0, 7))
def test_the_crc_matches_crc32c_in_hardware_and_in_the_table_fallback(
    data: bytes, skip: int
) -> None:
    assert fmt._NATIVE is not None
    view = memoryview(data)[min(skip, len(data)) :]  # every alignment
    want = crc32c.crc32c(view)
    assert fmt._NATIVE.crc32c(view) == want
    assert fmt._NATIVE.crc32c(view, True) == want
