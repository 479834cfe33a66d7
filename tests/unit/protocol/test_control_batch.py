"""Transaction markers (control batches) encoded as Kafka encodes them."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import ControlRecord, DefaultRecordBatch

from ingest.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_control_batch,
    control_marker,
    decode_records,
    split_batches,
)


def test_a_commit_marker_has_kafkas_control_batch_layout() -> None:
    data = build_control_batch(4242, 7, True, 3, 1_700_000_000_000, base_offset=55)
    (h,) = split_batches(memoryview(data))  # CRC-32C checked
    assert h.magic == 2
    assert h.attributes == 0x30  # transactional | control, no compression
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 7, -1)
    assert (h.base_offset, h.records_count, h.last_offset_delta) == (55, 1, 0)
    (record,) = decode_records(data, h)
    assert record.key == struct.pack(">hh", 0, 1)
    assert record.value == struct.pack(">hi", 0, 3)
    assert record.timestamp == 1_700_000_000_000
    assert control_marker(data, h) == (CONTROL_COMMIT, 3)


def test_kafka_python_reads_our_markers_as_control_records() -> None:
    for commit in (True, False):
        data = build_control_batch(9, 2, commit, 11, 1234, base_offset=100)
        batch = DefaultRecordBatch(data)
        assert batch.validate_crc()
        assert batch.is_control_batch and batch.is_transactional
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, -1)
        (record,) = list(batch)
        assert isinstance(record, ControlRecord)
        assert record.offset == 100
        assert record.commit is commit and record.abort is (not commit)
        assert record.version == 0
        assert record.value == struct.pack(">hi", 0, 11)


@given(
    st.integers(0, (1 << 63) - 1),
    st.integers(0, (1 << 15) - 1),
    st.booleans(),
    st.integers(0, (1 << 31) - 1),
)
def test_markers_round_trip(pid: int, epoch: int, commit: bool, coordinator_epoch: int) -> None:
    data = build_control_batch(pid, epoch, commit, coordinator_epoch, 0)
    (h,) = split_batches(memoryview(data))
    assert (h.producer_id, h.producer_epoch) == (pid, epoch)
    kind = CONTROL_COMMIT if commit else CONTROL_ABORT
    assert control_marker(data, h) == (kind, coordinator_epoch)
