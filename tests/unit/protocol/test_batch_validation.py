"""Produce-path batch validation: header checks as Kafka's LogValidator makes
them, record walks that match the header, and bounded streaming inflation."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable

import cramjam
import crc32c
import lz4.frame
import pytest
import zstandard

from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    CorruptRecordError,
    InflatedTooLargeError,
    InvalidRecordError,
    build_batch,
    check_client_batch,
    inflate,
    read_header,
    split_batches,
    validate_records,
    write_varint,
)


def _reheader(batch: bytes, **fields: int) -> bytes:
    layout = {
        "base_offset": (0, ">q"),
        "attributes": (21, ">h"),
        "last_offset_delta": (23, ">i"),
        "producer_id": (43, ">q"),
        "producer_epoch": (51, ">h"),
        "base_sequence": (53, ">i"),
        "records_count": (57, ">i"),
    }
    out = bytearray(batch)
    for name, value in fields.items():
        pos, fmt = layout[name]
        struct.pack_into(fmt, out, pos, value)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _one() -> bytes:
    return build_batch([(b"k", b"v", [], 1000)])


def _header(batch: bytes):  # type: ignore[no-untyped-def]
    [h] = split_batches(memoryview(batch))
    return h


@pytest.mark.parametrize(
    "fields",
    [
        {"last_offset_delta": 0x7FFFFFFF},
        {"last_offset_delta": 1_000_000},
        {"records_count": 2},
        {"last_offset_delta": -1, "records_count": 0},
        {"attributes": 0x20},  # control
        {"producer_id": -5},
        {"producer_id": 7, "producer_epoch": -1, "base_sequence": 0},
        {"producer_id": 7, "producer_epoch": 0, "base_sequence": -1},
        {"attributes": 0x10},  # transactional without a producer id
    ],
    ids=[
        "delta-overflows",
        "delta-inflated",
        "count-above-delta",
        "empty",
        "control",
        "negative-pid",
        "pid-without-epoch",
        "pid-without-sequence",
        "transactional-without-pid",
    ],
)
def test_header_that_kafka_refuses_from_a_client_is_invalid_record(fields: dict[str, int]) -> None:
    batch = _reheader(_one(), **fields)
    with pytest.raises(InvalidRecordError):
        check_client_batch(read_header(batch))


def test_unknown_compression_codec_is_corrupt_message() -> None:
    with pytest.raises(CorruptRecordError):
        check_client_batch(_header(_reheader(_one(), attributes=5)))


def test_a_non_idempotent_batch_may_carry_any_sequence_as_sarama_sends() -> None:
    check_client_batch(_header(_reheader(_one(), base_sequence=0)))
    check_client_batch(_header(_one()))


def test_records_fewer_than_the_header_says_are_invalid_record() -> None:
    batch = _reheader(_one(), last_offset_delta=1, records_count=2)
    with pytest.raises(InvalidRecordError):
        validate_records(memoryview(batch), _header(batch))


def test_records_more_than_the_header_says_are_invalid_record() -> None:
    two = build_batch([(b"a", b"1", [], 1), (b"b", b"2", [], 2)])
    batch = _reheader(two, last_offset_delta=0, records_count=1)
    with pytest.raises(InvalidRecordError):
        validate_records(memoryview(batch), _header(batch))


def test_record_offset_deltas_must_count_up_from_zero() -> None:
    body = bytearray(_one()[BATCH_HEADER_SIZE:])
    # record: length, attributes, ts delta, offset delta...
    assert body[3] == 0
    body[3] = 2  # offset delta 1
    batch = _compressed(Compression.NONE, bytes, bytes(body), 1)
    with pytest.raises(InvalidRecordError):
        validate_records(memoryview(batch), _header(batch))


def test_record_timestamps_are_reported() -> None:
    batch = build_batch([(None, b"a", [], 500), (None, b"b", [], 100), (None, b"c", [], 300)])
    stats = validate_records(memoryview(batch), _header(batch))
    assert (stats.min_timestamp, stats.max_timestamp) == (100, 500)


def _compressed(codec: int, compress: Callable[[bytes], bytes], plain: bytes, count: int) -> bytes:
    header = bytearray(_one()[:BATCH_HEADER_SIZE])
    body = compress(plain)
    struct.pack_into(">i", header, 8, BATCH_HEADER_SIZE - 12 + len(body))
    struct.pack_into(">h", header, 21, codec)
    struct.pack_into(">i", header, 23, count - 1)
    struct.pack_into(">i", header, 57, count)
    out = header + body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _xerial(data: bytes) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


CODECS: list[tuple[int, Callable[[bytes], bytes]]] = [
    (Compression.GZIP, gzip.compress),
    (Compression.SNAPPY, lambda b: bytes(cramjam.snappy.compress_raw(b))),
    (Compression.SNAPPY, _xerial),
    (Compression.LZ4, lz4.frame.compress),
    (Compression.ZSTD, lambda b: zstandard.ZstdCompressor().compress(b)),
]
CODEC_IDS = ["gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd"]


def _records_section(n: int, value: bytes) -> bytes:
    return build_batch([(b"k%d" % i, value, [("h", b"x")], 1000 + i) for i in range(n)])[
        BATCH_HEADER_SIZE:
    ]


@pytest.mark.parametrize(("codec", "compress"), CODECS, ids=CODEC_IDS)
def test_compressed_records_are_walked_across_chunks(
    codec: int, compress: Callable[[bytes], bytes]
) -> None:
    plain = _records_section(300, b"v" * 3000)  # ~900 KiB: several chunks
    batch = _compressed(codec, compress, plain, 300)
    stats = validate_records(memoryview(batch), _header(batch), 4 * 1024 * 1024)
    assert (stats.min_timestamp, stats.max_timestamp) == (1000, 1299)
    with pytest.raises(InvalidRecordError):
        bad = _compressed(codec, compress, plain, 301)
        validate_records(memoryview(bad), _header(bad), 4 * 1024 * 1024)


@pytest.mark.parametrize(("codec", "compress"), CODECS, ids=CODEC_IDS)
def test_a_batch_inflating_beyond_the_limit_is_message_too_large(
    codec: int, compress: Callable[[bytes], bytes]
) -> None:
    plain = _records_section(64, bytes(64 * 1024))  # 4 MiB of zeros
    batch = _compressed(codec, compress, plain, 64)
    assert len(batch) < len(plain) // 10
    with pytest.raises(InflatedTooLargeError):
        validate_records(memoryview(batch), _header(batch), 1024 * 1024)


@pytest.mark.parametrize(("codec", "compress"), CODECS, ids=CODEC_IDS)
def test_inflation_streams_in_bounded_chunks(
    codec: int, compress: Callable[[bytes], bytes]
) -> None:
    plain = bytes(3 * 1024 * 1024)
    sizes = [len(c) for c in inflate(codec, compress(plain), 8 * 1024 * 1024, chunk=64 * 1024)]
    assert sum(sizes) == len(plain)
    if codec != Compression.SNAPPY:  # snappy blocks come whole (32 KiB or the checked size)
        assert max(sizes) <= 64 * 1024


@pytest.mark.parametrize(("codec", "compress"), CODECS, ids=CODEC_IDS)
def test_truncated_compressed_records_are_rejected(
    codec: int, compress: Callable[[bytes], bytes]
) -> None:
    plain = _records_section(50, b"v" * 100)
    body = compress(plain)
    batch = _compressed(codec, lambda _b: body[: len(body) * 2 // 3], plain, 50)
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        validate_records(memoryview(batch), _header(batch))


def test_one_huge_record_is_skipped_without_being_held() -> None:
    value = bytes(2 * 1024 * 1024)
    rec = b"\0" + write_varint(0) + write_varint(0) + write_varint(-1)
    rec += write_varint(len(value)) + value + write_varint(0)
    plain = write_varint(len(rec)) + rec
    batch = _compressed(
        Compression.ZSTD, lambda b: zstandard.ZstdCompressor().compress(b), plain, 1
    )
    validate_records(memoryview(batch), _header(batch), 4 * 1024 * 1024)
    with pytest.raises(InflatedTooLargeError):
        validate_records(memoryview(batch), _header(batch), 1024 * 1024)
