"""Records of a partition read from its leader's Fetch response, as a
read_committed consumer sees them: batches of aborted transactions and
control batches left out, other producers' batches kept."""

from __future__ import annotations

from kio.schema.fetch.v12.response import AbortedTransaction, PartitionData
from kio.schema.types import ProducerId
from kio.static.primitive import Records, i32, i64

from api.cluster_reads.browse import _records_of
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch, build_control_batch

_TXN = 0x10  # attributes: transactional


def _batch(offset: int, values: list[str], pid: int = -1) -> bytes:
    return build_batch(
        [(None, v.encode(), [], 1000 + offset) for v in values],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        attributes=_TXN if pid >= 0 else 0,
    )


def _data(raw: bytes, aborted: list[tuple[int, int]]) -> PartitionData:
    return PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=i64(100),
        aborted_transactions=tuple(
            AbortedTransaction(producer_id=ProducerId(pid), first_offset=i64(first))
            for pid, first in aborted
        ),
        records=Records(raw),
    )


def _log() -> bytes:
    # pid 7 aborts offsets 0-1 (marker at 3), pid 8 commits offset 2 (marker at 5),
    # pid 7 commits offset 4 (marker at 6), a plain record at 7
    return b"".join(
        [
            _batch(0, ["a0", "a1"], pid=7),
            _batch(2, ["c2"], pid=8),
            build_control_batch(7, 0, False, 0, 1003, base_offset=3),
            _batch(4, ["c4"], pid=7),
            build_control_batch(8, 0, True, 0, 1005, base_offset=5),
            build_control_batch(7, 0, True, 0, 1006, base_offset=6),
            _batch(7, ["p7"]),
        ]
    )


def test_read_committed_leaves_out_aborted_transactions_and_markers() -> None:
    records, end = _records_of(_data(_log(), [(7, 0)]), 0, committed=True)
    assert [(r.offset, r.value) for r in records] == [(2, b"c2"), (4, b"c4"), (7, b"p7")]
    assert end == 8


def test_read_uncommitted_keeps_every_data_record_from_the_start_offset() -> None:
    records, _ = _records_of(_data(_log(), [(7, 0)]), 1, committed=False)
    assert [r.value for r in records] == [b"a1", b"c2", b"c4", b"p7"]


def test_an_aborted_transaction_begun_before_the_fetch_offset_still_counts() -> None:
    tail = b"".join(
        [_batch(1, ["a1"], pid=7), build_control_batch(7, 0, False, 0, 1002, base_offset=2)]
    )
    records, end = _records_of(_data(tail, [(7, 0)]), 1, committed=True)
    assert records == [] and end == 3
