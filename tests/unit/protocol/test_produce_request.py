"""Produce requests keep their record batches in the frame: the reader's
records are views of it, and the log's one copy stamps offsets as the
in-place patch did."""

from __future__ import annotations

import datetime
import io

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from ingest.protocol.codec import _writer, decode_request, parse_request_header
from ingest.protocol.records import build_batch, patch_base_offset, split_batches, stamp_batches
from tests.fuzz.frames import header_bytes


def _produce_frame(batches: dict[int, bytes]) -> memoryview:
    req = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName("orders"),
                partition_data=tuple(
                    PartitionProduceData(index=i32(i), records=Records(b)) for i, b in batches.items()
                ),
            ),
        ),
    )
    buf = io.BytesIO()
    _writer(ProduceRequest)(buf, req)
    return memoryview(header_bytes(0, 9, 7, b"client") + buf.getvalue())


def test_records_are_views_of_the_frame_not_copies() -> None:
    one = build_batch([(b"k", b"v", [], 1_700_000_000_000)])
    two = build_batch([(None, b"x" * 1000, [], 1_700_000_000_001)] * 3)
    frame = _produce_frame({0: one, 3: two})
    req = decode_request(parse_request_header(frame), frame)
    [topic] = req.topic_data
    assert topic.name == "orders"
    assert [int(p.index) for p in topic.partition_data] == [0, 3]
    for p, expected in zip(topic.partition_data, (one, two), strict=True):
        assert isinstance(p.records, memoryview)
        assert p.records.obj is frame.obj  # the frame's own bytes
        assert bytes(p.records) == expected
    assert req.timeout == datetime.timedelta(seconds=30) and int(req.acks) == -1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4),
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=0, max_value=2**31 - 1),
)
def test_stamping_in_the_copy_equals_patching_in_place(
    sizes: list[int], base: int, epoch: int
) -> None:
    payload = b"".join(
        build_batch([(b"k%d" % i, b"v" * i, [], 1_000 + i)] * n) for i, n in enumerate(sizes)
    )
    view = memoryview(payload)
    headers = split_batches(view)
    expected = bytearray(payload)
    offset = base
    for h in headers:
        patch_base_offset(expected, h.position, offset, epoch)
        offset += h.count
    stamped = stamp_batches(view, headers, base, epoch)
    assert isinstance(stamped, bytes)
    assert stamped == bytes(expected)
    assert [h.base_offset for h in split_batches(memoryview(stamped))] == [
        base + sum(sizes[:i]) for i in range(len(sizes))
    ]
