"""Router objects and the routed produce request: round trips, and bytes
that are not what they claim to be are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.zone_router import objects, wire

segments = st.lists(
    st.builds(
        objects.Segment,
        topic=st.text(min_size=1, max_size=40),
        partition=st.integers(0, 2**31 - 1),
        records=st.binary(max_size=300),
    ),
    min_size=1,
    max_size=8,
)


@given(segments)
def test_segments_round_trip_and_each_reads_back_alone(segs: list[objects.Segment]) -> None:
    data, refs = objects.encode_segments(segs)
    assert [(r.topic, r.partition) for r in refs] == [(s.topic, s.partition) for s in segs]
    for s, r in zip(segs, refs, strict=True):
        assert bytes(objects.read_segment(data, r)) == s.records
        # a ranged read of just this segment
        part = data[r.position : r.position + r.size]
        assert bytes(objects.read_segment(part, r, base=r.position)) == s.records


def test_a_segment_named_as_another_partition_or_corrupted_is_refused() -> None:
    data, (a, b) = objects.encode_segments(
        [objects.Segment("t", 0, b"x" * 100), objects.Segment("t", 1, b"y" * 50)]
    )
    with pytest.raises(objects.RouterFormatError):
        objects.read_segment(data, objects.SegmentRef("t", 1, a.position, a.size))
    with pytest.raises(objects.RouterFormatError):
        objects.read_segment(data, objects.SegmentRef("u", 0, a.position, a.size))
    with pytest.raises(objects.RouterFormatError):
        objects.read_segment(data, objects.SegmentRef("t", 0, a.position, a.size + 1))
    with pytest.raises(objects.RouterFormatError):
        objects.read_segment(data, objects.SegmentRef("t", 1, b.position + 1, b.size - 1))
    broken = bytearray(data)
    broken[a.position + a.size - 1] ^= 1
    with pytest.raises(objects.RouterFormatError):
        objects.read_segment(bytes(broken), a)


def test_router_keys_name_their_writer_and_age() -> None:
    key = objects.new_key(7, now_s=1000.0)
    assert objects.is_router_key(key) and objects.is_router_key(key, writer=7)
    assert not objects.is_router_key(key, writer=8)
    assert objects.key_writer(key) == 7
    assert objects.key_age_s(key, now_s=1300.5) == pytest.approx(300.5)
    for bad in ("router/7/../x", "wal/7/0000000001000-" + "0" * 32, key + "x", "x" + key):
        assert objects.key_writer(bad) is None


refs = st.lists(
    st.builds(
        objects.SegmentRef,
        topic=st.text(min_size=1, max_size=30),
        partition=st.integers(0, 2**31 - 1),
        position=st.integers(0, 2**40),
        size=st.integers(1, 2**31 - 1),
    ),
    min_size=1,
    max_size=6,
)


@given(
    refs,
    st.sampled_from([-1, 1]),
    st.integers(0, 2**31 - 1),
    st.none() | st.text(max_size=20),
    st.none() | st.text(max_size=20),
)
def test_routed_request_round_trips(
    segs: list[objects.SegmentRef], acks: int, timeout: int, tid: str | None, cid: str | None
) -> None:
    req = wire.RoutedRequest(objects.new_key(3), acks, timeout, tid, cid, tuple(segs))
    assert wire.decode(wire.encode(req)) == req


def test_bytes_that_are_not_a_routed_request_are_refused() -> None:
    good = wire.encode(
        wire.RoutedRequest("router/1/x", 1, 100, None, None, (objects.SegmentRef("t", 0, 0, 9),))
    )
    for bad in (
        b"",
        b"TLZR",
        b"XXXX" + good[4:],
        good[:-1],
        good + b"\0",
        good[:4] + b"\x09" + good[5:],
    ):
        with pytest.raises(wire.WireError):
            wire.decode(bad)
