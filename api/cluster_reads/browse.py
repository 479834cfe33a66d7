"""Records of a partition led by another broker, for the console's message
browser: Fetch v12 (and ListOffsets for a time) to the partition's leader,
batches split and decoded by :mod:`ingest.protocol.records`.

``committed``: read_committed as a Kafka consumer reads it: up to the last
stable offset, without control batches or the batches of transactions the
leader lists as aborted."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse, PartitionData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from api.cluster_reads.model import TopicPartition
from api.cluster_reads.peer import PeerError, PeerReads
from ingest.cluster.peer_client import peer_request
from ingest.cluster.peer_connection import PeerSecurity
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import Record, decode_records, split_batches

__all__ = ["RemotePage", "browse_remote"]

_FETCH = 1
_FETCH_BYTES = 1 << 20
_MAX_FETCHES = 16


@dataclass(frozen=True, slots=True)
class RemotePage:
    start_offset: int
    high_watermark: int
    records: list[Record]


def _records_of(data: PartitionData, start: int, committed: bool) -> tuple[list[Record], int]:
    """The data records at or after ``start`` and the offset after the last batch."""
    raw = bytes(data.records or b"")
    aborted = sorted(
        (int(a.first_offset), int(a.producer_id)) for a in (data.aborted_transactions or ())
    )
    active: set[int] = set()
    out: list[Record] = []
    end = start
    view = memoryview(raw)
    for h in split_batches(view, verify_crc=False):
        end = h.base_offset + h.last_offset_delta + 1
        while committed and aborted and aborted[0][0] <= end - 1:
            active.add(aborted.pop(0)[1])
        if h.is_control:
            active.discard(h.producer_id)  # the marker ends that producer's transaction
            continue
        if committed and h.is_transactional and h.producer_id in active:
            continue
        out += [r for r in decode_records(view, h) if r.offset >= start]
    return out, end


async def browse_remote(
    leader: BrokerEndpoint,
    tp: TopicPartition,
    offset: int | None,
    timestamp: int | None,
    limit: int,
    committed: bool,
    timeout_s: float,
    security: PeerSecurity | None = None,
) -> RemotePage:
    """Up to ``limit`` records of ``tp`` from ``offset`` (default: the log
    start) or from the first record at or after ``timestamp`` (ms)."""
    topic, partition = tp
    peer = PeerReads(leader, timeout_s, security)
    ends = (await peer.end_offsets([tp], earliest=True))[tp]
    if ends.high_watermark is None or ends.log_start_offset is None:
        raise PeerError(f"broker {leader.node_id} does not lead {topic}-{partition} now")
    hw, first = ends.high_watermark, ends.log_start_offset
    if timestamp is not None:
        found = (await peer.offsets_for([tp], timestamp))[tp]
        start = hw if found is None else found
    else:
        start = first if offset is None else offset
    start = max(start, first)
    out: list[Record] = []
    position = start
    for _ in range(_MAX_FETCHES):
        if len(out) >= limit or position >= hw:
            break
        request = FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(0)),
            min_bytes=i32(0),
            max_bytes=i32(_FETCH_BYTES),
            isolation_level=i8(1 if committed else 0),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(partition),
                            fetch_offset=i64(position),
                            partition_max_bytes=i32(_FETCH_BYTES),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        response = await peer_request(
            leader, _FETCH, 12, request, timeout_s, "tidelake-console", security=security
        )
        assert isinstance(response, FetchResponse)
        [data] = [p for t in response.responses for p in t.partitions]
        if data.error_code != ErrorCode.none:
            raise PeerError(f"Fetch {topic}-{partition}: {ErrorCode(data.error_code).name}")
        hw = int(data.high_watermark)
        records, end = _records_of(data, position, committed)
        out += records
        if end <= position:
            break  # nothing more below the last stable offset
        position = end
    return RemotePage(start, hw, out[:limit])
