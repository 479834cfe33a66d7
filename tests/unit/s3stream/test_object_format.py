"""The stream set object format: round trips and corruption detection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.errors import CorruptDataError
from ingest.s3stream.api import StreamBatch
from ingest.s3stream.objects import (
    FOOTER_SIZE,
    IndexEntry,
    StreamRange,
    decode_index,
    encode,
    iter_batches,
)


@st.composite
def stream_ranges(draw: st.DrawFn) -> list[list[StreamBatch]]:
    ids = draw(st.lists(st.integers(0, 2**62), min_size=0, max_size=5, unique=True))
    out: list[list[StreamBatch]] = []
    for sid in ids:
        offset = draw(st.integers(0, 2**40))
        batches = []
        for payload, count in draw(
            st.lists(
                st.tuples(st.binary(max_size=200), st.integers(1, 1000)), min_size=1, max_size=6
            )
        ):
            batches.append(StreamBatch(sid, offset, count, payload))
            offset += count
        out.append(batches)
    return out


def _body(ranges: list[list[StreamBatch]]) -> bytes:
    buffers, _ = encode(ranges)
    return b"".join(buffers)


def _first_range(ranges: list[list[StreamBatch]]) -> tuple[bytes, IndexEntry, StreamRange]:
    """The encoded object, its first index entry, and that range read on its own."""
    body = _body(ranges)
    entry = decode_index(body)[0]
    return (
        body,
        entry,
        StreamRange(entry.stream_id, body[entry.position : entry.position + entry.length]),
    )


@settings(max_examples=150, deadline=None)
@given(stream_ranges())
def test_encode_then_decode_round_trips(ranges: list[list[StreamBatch]]) -> None:
    body = _body(ranges)
    index = decode_index(body, object_size=len(body))
    assert [(e.stream_id, e.start_offset, e.end_offset) for e in index] == [
        (r[0].stream_id, r[0].base_offset, r[-1].end_offset) for r in ranges
    ]
    for entry, batches in zip(index, ranges, strict=True):
        data = body[entry.position : entry.position + entry.length]
        got = list(iter_batches(entry.stream_id, data))
        assert [(b.stream_id, b.base_offset, b.count, bytes(b.payload)) for b in got] == [
            (b.stream_id, b.base_offset, b.count, bytes(b.payload)) for b in batches
        ]


@settings(max_examples=100, deadline=None)
@given(stream_ranges(), st.data())
def test_decode_index_from_the_tail_only(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body = _body(ranges)
    full = decode_index(body)
    # the footer says how much tail is needed; any tail at least that long works
    need = len(body) - full_index_position(body)
    extra = data.draw(st.integers(0, len(body) - need))
    assert decode_index(body[len(body) - need - extra :]) == full


def full_index_position(body: bytes) -> int:
    import struct

    return int(struct.unpack_from("<Q", body, len(body) - FOOTER_SIZE)[0])


@settings(max_examples=150, deadline=None)
@given(stream_ranges(), st.data())
def test_any_flipped_byte_in_index_or_footer_is_detected(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body = bytearray(_body(ranges))
    start = full_index_position(bytes(body))
    i = data.draw(st.integers(start, len(body) - 1))
    bit = data.draw(st.integers(0, 7))
    body[i] ^= 1 << bit
    with pytest.raises((CorruptDataError, ValueError)):
        decode_index(bytes(body), object_size=len(body))


@settings(max_examples=100, deadline=None)
@given(stream_ranges().filter(lambda r: any(len(b.payload) for rr in r for b in rr)), st.data())
def test_a_flipped_payload_byte_fails_the_batch_checksum(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body = bytearray(_body(ranges))
    index = decode_index(bytes(body))
    payload_bytes = [(e, p) for e in index for p in range(e.position, e.position + e.length)]
    e, p = data.draw(st.sampled_from(payload_bytes))
    body[p] ^= 0x01
    with pytest.raises(CorruptDataError):
        list(iter_batches(e.stream_id, bytes(body[e.position : e.position + e.length])))


@settings(max_examples=150, deadline=None)
@given(stream_ranges().filter(lambda r: any(len(rr) for rr in r)), st.data())
def test_a_stream_range_refuses_any_flipped_bit_of_its_batches(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body = bytearray(_body(ranges))
    e = data.draw(st.sampled_from([e for e in decode_index(bytes(body)) if e.length]))
    i = data.draw(st.integers(e.position, e.position + e.length - 1))
    body[i] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CorruptDataError):
        StreamRange(e.stream_id, memoryview(body)[e.position : e.position + e.length])


def test_truncated_object_is_corrupt() -> None:
    with pytest.raises(CorruptDataError):
        decode_index(b"short")


def test_encode_rejects_non_contiguous_batches() -> None:
    with pytest.raises(ValueError):
        encode([[StreamBatch(1, 0, 1, b"a"), StreamBatch(1, 5, 1, b"b")]])


@pytest.mark.parametrize("streams", [3, 2500])
async def test_read_index_fetches_only_the_tail(streams: int) -> None:
    from ingest.s3stream.objects import read_index
    from ingest.s3stream.objectstore import MemoryObjectStore

    ranges = [[StreamBatch(sid, 0, 1, b"p" * 50)] for sid in range(streams)]
    buffers, index = encode(ranges)
    body = b"".join(buffers)
    store = MemoryObjectStore()
    await store.put("o", body)
    assert await read_index(store, "o", len(body)) == index
    store.objects["o"] = body[:-1] + bytes([body[-1] ^ 1])
    with pytest.raises(CorruptDataError):
        await read_index(store, "o", len(body))


@settings(max_examples=100, deadline=None)
@given(stream_ranges().filter(lambda r: len(r) > 0), st.data())
def test_stream_range_serves_batches_from_any_offset(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body, entry, rng = _first_range(ranges)
    batches = ranges[0]
    assert len(rng) == entry.length
    # cut from a whole-object read, a range counts (keeps alive) the whole object
    whole = StreamRange(
        entry.stream_id, memoryview(body)[entry.position : entry.position + entry.length]
    )
    assert len(whole) == len(body)
    assert [bytes(b.payload) for b in whole.batches_from(0)] == [
        bytes(b.payload) for b in rng.batches_from(0)
    ]
    offset = data.draw(st.integers(batches[0].base_offset, batches[-1].end_offset))
    want = [b for b in batches if b.end_offset > offset]
    got = list(rng.batches_from(offset))
    assert [(b.base_offset, b.count, bytes(b.payload)) for b in got] == [
        (b.base_offset, b.count, bytes(b.payload)) for b in want
    ]


@settings(max_examples=150, deadline=None)
@given(stream_ranges().filter(lambda r: len(r) > 0), st.data())
def test_stream_range_take_keeps_to_end_and_byte_budget(
    ranges: list[list[StreamBatch]], data: st.DataObject
) -> None:
    body, entry, rng = _first_range(ranges)
    batches = ranges[0]
    offset = data.draw(st.integers(batches[0].base_offset, batches[-1].end_offset))
    end = data.draw(st.integers(offset, batches[-1].end_offset + 5))
    budget = data.draw(st.integers(0, 600))
    held = data.draw(st.lists(st.integers(0, 300), max_size=2))  # bytes already taken
    out = [StreamBatch(entry.stream_id, -1, 1, b"x" * n) for n in held]
    total, done = rng.take(offset, end, budget, out, sum(held))
    # the model: from the batch holding offset, below end, within the budget,
    # and always one batch when nothing was taken before
    want: list[StreamBatch] = []
    t = sum(held)
    stopped = False
    for b in batches:
        if b.end_offset <= offset:
            continue
        if b.base_offset >= end or ((held or want) and t + len(b.payload) > budget):
            stopped = True
            break
        want.append(b)
        t += len(b.payload)
    got = out[len(held) :]
    assert [(b.base_offset, b.count, bytes(b.payload)) for b in got] == [
        (b.base_offset, b.count, bytes(b.payload)) for b in want
    ]
    assert total == t
    assert done == (stopped or t >= budget)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9000), st.booleans()), max_size=12))
def test_concat_joins_buffers_of_any_size_and_kind(sizes: list[tuple[int, bool]]) -> None:
    from ingest.s3stream.objects.format import concat

    parts = [bytes([i % 251]) * n for i, (n, _) in enumerate(sizes)]
    mixed = [memoryview(p) if as_view else p for p, (_, as_view) in zip(parts, sizes, strict=True)]
    assert bytes(concat(mixed)) == b"".join(parts)
