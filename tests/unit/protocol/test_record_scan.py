"""The C record walk (``check_records``) against the Python walk
(``validate_records``): for every batch, valid or mangled, compressed or not,
both give the same timestamps or the same error, and the null-key answer of
the C walk is the compacted-topic check's."""

from __future__ import annotations

import struct

import crc32c
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.protocol import record_scan
from ingest.protocol.errors import KafkaError
from ingest.protocol.record_scan import check_records, scan_fast
from ingest.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    InflatedTooLargeError,
    build_batch,
    decode_records,
    split_batches,
    validate_records,
)

Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


def test_the_c_scanner_is_built() -> None:
    # the package builds it (pyproject's ext-modules); without it every
    # comparison below would compare the Python walk with itself
    assert record_scan.SCANNER is not None


def _with_body(batch: bytes, body: bytes, codec: int, count: int | None = None) -> bytes:
    """``batch``'s header over another records section (codec, length, CRC fixed)."""
    out = bytearray(batch[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    attributes = struct.unpack_from(">h", out, 21)[0] & ~0x07
    struct.pack_into(">h", out, 21, attributes | codec)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
        struct.pack_into(">i", out, 23, max(count - 1, 0))  # lastOffsetDelta
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.LZ4:
        return bytes(lz4.frame.compress(data))
    if codec == Compression.ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    return data


def _outcome(fn, batch: bytes, limit: int):  # type: ignore[no-untyped-def]
    [h] = split_batches(memoryview(batch), verify_crc=False)
    try:
        stats = fn(memoryview(batch), h, limit)
    except KafkaError as exc:
        return (type(exc), str(exc))
    return stats if not isinstance(stats, tuple) else stats[0]


_record = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
    st.integers(min_value=-(10**12), max_value=10**12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record, min_size=1, max_size=30),
    codec=st.sampled_from([Compression.NONE, Compression.LZ4, Compression.ZSTD]),
    cut=st.integers(min_value=0, max_value=4000),
    flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=3),
    count_delta=st.sampled_from([0, 0, 0, -1, 1]),
    limit=st.sampled_from([1 << 62, 200]),
)
def test_c_and_python_walks_agree(records, codec, cut, flips, count_delta, limit) -> None:  # type: ignore[no-untyped-def]
    base = build_batch(records)
    raw = bytearray(base[BATCH_HEADER_SIZE:])
    for pos, value in flips:  # mangle the records themselves, before compression
        if raw:
            raw[pos % len(raw)] = value
    if cut % 3 == 0 and raw:
        raw = raw[: cut % len(raw)]  # truncated records
    batch = _with_body(base, _compress(codec, bytes(raw)), codec, len(records) + count_delta)
    expected = _outcome(validate_records, batch, limit)
    assert _outcome(check_records, batch, limit) == expected


def test_every_record_field_is_walked_and_timestamps_kept() -> None:
    records: list[Rec] = [
        (None if i % 7 == 0 else b"k%d" % i, b"v" * i, [("h", b"x"), ("n", None)], 1000 - i * 3)
        for i in range(200)
    ]
    batch = _with_body(build_batch(records), b"", Compression.NONE)  # header only, then:
    raw = build_batch(records)[BATCH_HEADER_SIZE:]
    batch = _with_body(batch, _compress(Compression.LZ4, raw), Compression.LZ4, 200)
    [h] = split_batches(memoryview(batch))
    assert record_scan.SCANNER is not None
    fast = scan_fast(memoryview(batch), h, 1 << 62, record_scan.SCANNER)
    assert fast is not None  # decided by C, not handed to the Python walk
    stats, null_key = fast
    assert (stats.min_timestamp, stats.max_timestamp) == (1000 - 199 * 3, 1000)
    assert null_key is True
    assert [r.key for r in decode_records(memoryview(batch), h)][:2] == [None, b"k1"]


def test_records_larger_than_a_chunk_are_walked_across_chunks() -> None:
    big = b"x" * (300 * 1024)  # several 64 KiB inflate chunks per record
    records: list[Rec] = [(b"a", big, [], 5), (b"b", big, [], 9), (b"c", b"", [], 7)]
    raw = build_batch(records)[BATCH_HEADER_SIZE:]
    batch = _with_body(build_batch(records), _compress(Compression.LZ4, raw), Compression.LZ4)
    [h] = split_batches(memoryview(batch))
    assert record_scan.SCANNER is not None
    fast = scan_fast(memoryview(batch), h, 1 << 62, record_scan.SCANNER)
    assert fast is not None
    assert (fast[0].min_timestamp, fast[0].max_timestamp, fast[1]) == (5, 9, False)


def _small_lz4(records: list[Rec], body: bytes | None = None) -> bytes:
    raw = build_batch(records)[BATCH_HEADER_SIZE:]
    compressed = _compress(Compression.LZ4, raw) if body is None else body
    return _with_body(build_batch(records), compressed, Compression.LZ4)


def test_a_small_lz4_batch_is_inflated_in_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    # a latency-bound producer's batch: decided by C without the chunked inflate
    records: list[Rec] = [(b"k%d" % i, b"v" * 1000, [], 100 + i) for i in range(27)]
    batch = _small_lz4(records)
    assert len(batch) - BATCH_HEADER_SIZE <= record_scan._ONE_PIECE_LZ4

    def chunked(*_args: object) -> None:
        raise AssertionError("the chunked inflate was used")

    monkeypatch.setattr(record_scan, "inflate", chunked)
    [h] = split_batches(memoryview(batch))
    assert record_scan.SCANNER is not None
    fast = scan_fast(memoryview(batch), h, 1 << 62, record_scan.SCANNER)
    assert fast is not None
    assert (fast[0].min_timestamp, fast[0].max_timestamp, fast[1]) == (100, 126, False)
    with pytest.raises(InflatedTooLargeError):  # the limit holds on this path too
        check_records(memoryview(batch), h, 20_000)


def test_small_lz4_batches_that_are_not_one_piece_agree_with_the_python_walk() -> None:
    records: list[Rec] = [(b"a", b"x" * 500, [], 3), (b"b", b"y" * 500, [], 8)]
    raw = build_batch(records)[BATCH_HEADER_SIZE:]
    cut = len(raw) // 2
    # two frames, one after the other (each frame's records in one piece)
    two_frames = _compress(Compression.LZ4, raw[:cut]) + _compress(Compression.LZ4, raw[cut:])
    # a whole frame, then bytes that are no frame
    trailing = _compress(Compression.LZ4, raw) + b"\x01\x02\x03"
    # small, but inflating past one chunk
    big: list[Rec] = [(b"z", b"\0" * (600 * 1024), [], 11)]
    # a whole frame of nothing, under a header that claims no records
    empty = _with_body(build_batch(records), _compress(Compression.LZ4, b""), Compression.LZ4, 0)
    for batch, limit in (
        (empty, 1 << 62),
        (_small_lz4(records, two_frames), 1 << 62),
        (_small_lz4(records, trailing), 1 << 62),
        (_small_lz4(big), 1 << 62),
        (_small_lz4(big), 300 * 1024),
    ):
        assert len(batch) - BATCH_HEADER_SIZE <= record_scan._ONE_PIECE_LZ4
        expected = _outcome(validate_records, batch, limit)
        assert _outcome(check_records, batch, limit) == expected
    assert _outcome(check_records, _small_lz4(records, two_frames), 1 << 62).max_timestamp == 8
    assert _outcome(check_records, _small_lz4(big), 1 << 62).min_timestamp == 11
    assert _outcome(check_records, _small_lz4(big), 300 * 1024)[0] is InflatedTooLargeError


def test_a_bomb_is_refused_at_the_limit_by_both_walks() -> None:
    raw = build_batch([(b"k", b"\0" * (8 << 20), [], 1)])[BATCH_HEADER_SIZE:]
    batch = _with_body(build_batch([(b"k", b"", [], 1)]), _compress(Compression.ZSTD, raw), 4)
    [h] = split_batches(memoryview(batch))
    for walk in (check_records, validate_records):
        with pytest.raises(InflatedTooLargeError):
            walk(memoryview(batch), h, 1 << 20)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(st.binary(max_size=300), max_size=40),
    cut=st.integers(min_value=0, max_value=50),
)
def test_c_record_starts_match_the_python_loop(records: list[bytes], cut: int) -> None:
    from ingest.protocol.records import write_varint
    from table_topic.convert.vector import _record_starts, _starts

    data = b"".join(write_varint(len(r)) + r for r in records)
    if cut and data:
        data = data[: len(data) - cut % len(data)]  # cut off: both refuse it
    try:
        expected: object = list(_record_starts(data, len(records)))
    except (IndexError, KafkaError):
        expected = "refused"
    try:
        got: object = [int(x) for x in _starts(data, len(records))]
    except KafkaError:
        got = "refused"
    assert got == expected


def test_c_gather_concatenates_the_ranges_and_refuses_ranges_outside() -> None:
    import numpy as np

    from table_topic.convert.vector import _gather

    buf = np.frombuffer(b"0123456789" + b"\x00" * 16, np.uint8)
    out, offsets = _gather(buf, np.array([1, 5, 0]), np.array([3, 0, 2]))
    assert out.tobytes() == b"12301" and list(offsets) == [0, 3, 3, 5]
    assert record_scan.NATIVE is not None
    with pytest.raises(ValueError):
        record_scan.NATIVE.gather(
            b"abc", np.array([2], np.int64).tobytes(), np.array([5], np.int64).tobytes()
        )


def _fields_both(data: bytes, count: int):  # type: ignore[no-untyped-def]
    """(C fields, numpy fields) of a records section; each a list of six
    int lists, None (not plain records) or "refused" (corrupt)."""
    import numpy as np

    from table_topic.convert import vector

    def outcome(native: object) -> object:
        saved = vector.NATIVE
        vector.NATIVE = native  # type: ignore[assignment]
        try:
            arr = np.frombuffer(data + b"\x00" * vector._PAD, np.uint8)
            got = vector._fields(arr, vector._starts(data, count))
        except (IndexError, KafkaError):
            return "refused"
        finally:
            vector.NATIVE = saved  # type: ignore[assignment]
        return None if got is None else [[int(x) for x in col] for col in got]

    return outcome(record_scan.NATIVE), outcome(None)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=40)),
            st.one_of(st.none(), st.binary(min_size=5, max_size=300)),
            st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=2),
            st.integers(min_value=0, max_value=2**41),
        ),
        min_size=1,
        max_size=30,
    ),
    flip=st.one_of(st.none(), st.tuples(st.integers(min_value=0), st.integers(1, 255))),
)
def test_c_record_fields_match_the_numpy_walk(
    records: list[Rec], flip: tuple[int, int] | None
) -> None:
    """Plain records give the same six columns both ways; anything else (null
    values, headers, a mangled byte) is left by the C walk to the numpy walk."""
    batch = build_batch(records)
    h = split_batches(memoryview(batch))[0]
    data = bytearray(batch[h.position + BATCH_HEADER_SIZE : h.position + h.size])
    if flip is not None:
        data[flip[0] % len(data)] ^= flip[1]
    c_walk, numpy_walk = _fields_both(bytes(data), len(records))

    def used(walk: object) -> object:  # what convert_vectorised goes on with
        if isinstance(walk, list) and any(n < 5 for n in walk[4]):
            return None  # a value too short for the schema id frame
        return walk

    if c_walk is not None:
        assert used(c_walk) == used(numpy_walk)
    plain = all(v is not None and not hs for _, v, hs, _ in records)
    if flip is None and plain:
        assert c_walk is not None  # the C walk takes every plain record
        assert isinstance(c_walk, list)
        assert c_walk[4] == [len(v or b"") for _, v, _, _ in records]
        assert c_walk[2] == [-1 if k is None else len(k) for k, _, _, _ in records]
