"""Record batch v2: parsing, CRC checks, in-place stamping, record decoding."""

from __future__ import annotations

import gzip
import struct

import crc32c
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    build_batch,
    decode_records,
    patch_base_offset,
    read_header,
    set_log_append_time,
    split_batches,
)

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.lists(
            st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
            max_size=3,
        ),
        st.integers(min_value=0, max_value=2**40),
    ),
    min_size=1,
    max_size=20,
)


@given(records_st)
@settings(max_examples=150, deadline=None)
def test_built_batches_round_trip_through_split_and_decode(recs: list) -> None:  # type: ignore[type-arg]
    data = build_batch([(k, v, list(h), ts) for k, v, h, ts in recs], base_offset=7)
    headers = split_batches(memoryview(data))
    assert len(headers) == 1
    h = headers[0]
    assert h.count == len(recs) and h.base_offset == 7
    out = list(decode_records(data, h))
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in out] == [
        (k, v, list(hd), ts) for k, v, hd, ts in recs
    ]
    assert [r.offset for r in out] == list(range(7, 7 + len(recs)))


def test_crc_mismatch_is_corrupt_message() -> None:
    data = bytearray(build_batch([(b"k", b"v", [], 1)]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as exc:
        split_batches(memoryview(data))
    assert exc.value.error_code == ErrorCode.corrupt_message


def test_truncated_batch_is_corrupt_message() -> None:
    data = build_batch([(b"k", b"v" * 50, [], 1)])
    with pytest.raises(CorruptRecordError):
        split_batches(memoryview(data[:-10]))
    with pytest.raises(CorruptRecordError):
        split_batches(memoryview(data[:30]))


def test_old_message_format_is_rejected() -> None:
    data = bytearray(build_batch([(b"k", b"v", [], 1)]))
    data[16] = 1  # magic
    with pytest.raises(InvalidRecordError):
        split_batches(memoryview(data))


def test_patching_base_offset_keeps_the_crc_valid() -> None:
    data = bytearray(build_batch([(b"k", b"v", [], 1), (b"k2", b"v2", [], 2)]))
    patch_base_offset(data, 0, 1234, 3)
    h = split_batches(memoryview(data))[0]
    assert h.base_offset == 1234 and h.partition_leader_epoch == 3
    assert [r.offset for r in decode_records(bytes(data), h)] == [1234, 1235]


def test_log_append_time_restamps_and_recomputes_crc() -> None:
    data = bytearray(build_batch([(b"k", b"v", [], 1), (b"k2", b"v2", [], 2)]))
    h = read_header(data)
    set_log_append_time(data, h, 99_000)
    h2 = split_batches(memoryview(data))[0]  # CRC verified
    assert h2.log_append_time and h2.max_timestamp == 99_000
    assert {r.timestamp for r in decode_records(bytes(data), h2)} == {99_000}


def _compressed(codec: int, compress: object) -> bytes:
    plain = build_batch([(b"key", b"value-%d" % i, [("h", b"x")], 1000 + i) for i in range(5)])
    body = compress(plain[BATCH_HEADER_SIZE:])  # type: ignore[operator]
    out = bytearray(plain[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize(
    "codec,compress",
    [
        (Compression.GZIP, gzip.compress),
        (Compression.LZ4, lz4.frame.compress),
        (Compression.ZSTD, lambda b: zstandard.ZstdCompressor().compress(b)),
    ],
)
def test_compressed_batches_decode(codec: int, compress: object) -> None:
    data = _compressed(codec, compress)
    h = split_batches(memoryview(data))[0]
    assert h.compression == codec
    values = [r.value for r in decode_records(data, h)]
    assert values == [b"value-%d" % i for i in range(5)]


def test_several_batches_in_one_payload_are_each_indexed() -> None:
    a = build_batch([(b"a", b"1", [], 1)])
    b = build_batch([(b"b", b"2", [], 2), (b"c", b"3", [], 3)])
    hs = split_batches(memoryview(a + b))
    assert [h.count for h in hs] == [1, 2]
    assert hs[1].position == len(a)
