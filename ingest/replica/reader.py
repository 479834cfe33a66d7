"""Read-only partitions for consumers on a broker that does not lead them
(KIP-392 follower fetching, with object storage as the follower's copy).

A broker of a cluster shares the object store and the metadata store with the
leader of every partition, so it can serve a partition's records without any
replication: the partition's stream id comes from the metadata store, its end
is what the leader has uploaded (the stream's end in the metadata store), and
the records come from objects through this broker's block cache. The part the
leader has not uploaded yet (at most one upload interval, ``upload_interval_ms``,
plus the upload itself) is not visible here: a fetch past the uploaded end
waits for the next upload rather than failing, so the consumer stays on this
broker.

What this reader does not know is the partition's transaction state (the last
stable offset and the aborted transactions), which only the leader keeps. A
read_committed read therefore stops before the first transactional or control
batch; when that batch is the first one to return, the read reports
``to_leader`` and the caller sends the consumer to the leader, which filters
the transaction (see :mod:`ingest.handlers.fetch`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from ingest.log.manager import LogManager
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import BATCH_HEADER_SIZE, read_header
from ingest.s3stream.api import Stream, StreamEngine
from ingest.s3stream.errors import OffsetOutOfRangeError, UnknownStreamError

__all__ = ["ReplicaRead", "ReplicaReader"]

DEFAULT_REFRESH_S = 0.2
"""How stale a replica's log start and uploaded end may be before a read asks
the metadata store again (and how often a waiting fetch looks)."""

_MAX_REPLICAS = 10_000  # partitions with a cached view; all are dropped past this


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes
    to_leader: bool = False  # read_committed met transactional data: the leader serves it


@dataclass(slots=True)
class _Replica:
    stream_id: int
    stream: Stream
    refreshed: float
    lock: asyncio.Lock


class ReplicaReader:
    """Serves reads of partitions this broker does not lead, from object storage.

    A partition's view (its log start and uploaded end) is refreshed from the
    metadata store when a read finds it older than ``refresh_s`` seconds, so
    the ends a consumer sees here lag the store's by at most that; concurrent
    reads of one partition share one refresh.
    """

    def __init__(
        self,
        engine: StreamEngine,
        logs: LogManager,
        *,
        refresh_s: float = DEFAULT_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._logs = logs
        self.refresh_s = refresh_s
        self._clock = clock
        self._replicas: dict[tuple[str, int], _Replica] = {}

    def _stream_id(self, topic: str, partition: int) -> int | None:
        t = self._logs.get(topic)
        if t is None or not 0 <= partition < t.partition_count:
            return None
        return t.stream_ids[partition]

    async def _open(self, stream_id: int) -> Stream:
        open_reader = getattr(self._engine, "open_reader", None)
        if open_reader is not None:
            stream: Stream = await open_reader(stream_id)
            return stream
        return await self._engine.open_stream(stream_id)  # an engine without objects

    async def _view(
        self, topic: str, partition: int, stream_id: int, *, force: bool = False
    ) -> _Replica:
        key = (topic, partition)
        rep = self._replicas.get(key)
        if rep is None or rep.stream_id != stream_id:
            if len(self._replicas) >= _MAX_REPLICAS:
                self._replicas.clear()
            rep = _Replica(stream_id, await self._open(stream_id), self._clock(), asyncio.Lock())
            self._replicas[key] = rep
            return rep
        if not force and self._clock() - rep.refreshed < self.refresh_s:
            return rep
        async with rep.lock:
            if force or self._clock() - rep.refreshed >= self.refresh_s:
                rep.stream = await self._open(stream_id)
                rep.refreshed = self._clock()
        return rep

    def known_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(uploaded end, log start) as last seen here, or (-1, -1)."""
        rep = self._replicas.get((topic, partition))
        if rep is None:
            return -1, -1
        return rep.stream.confirm_offset, rep.stream.start_offset

    def forget(self, topic: str, partition: int) -> None:
        self._replicas.pop((topic, partition), None)

    async def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, *, read_committed: bool
    ) -> ReplicaRead:
        """Record batches of the partition from ``offset`` up to what its leader
        uploaded (at least one batch if any, else at most ``max_bytes``). An
        offset below the log start is OFFSET_OUT_OF_RANGE; one at or past the
        uploaded end reads nothing (the caller waits and asks again)."""
        sid = self._stream_id(topic, partition)
        if sid is None:
            return ReplicaRead(ErrorCode.unknown_topic_or_partition, -1, -1, b"")
        try:
            rep = await self._view(topic, partition, sid)
            stream = rep.stream
            if offset < stream.start_offset:
                return ReplicaRead(
                    ErrorCode.offset_out_of_range, stream.confirm_offset, stream.start_offset, b""
                )
            end = stream.confirm_offset
            if offset >= end:
                return ReplicaRead(ErrorCode.none, end, stream.start_offset, b"")
            try:
                batches = await stream.fetch(offset, end, max(1, max_bytes))
            except OffsetOutOfRangeError:
                # trimmed (retention, delete records) since the view was taken
                rep = await self._view(topic, partition, sid, force=True)
                stream = rep.stream
                start, end = stream.start_offset, stream.confirm_offset
                err = ErrorCode.offset_out_of_range if offset < start else ErrorCode.none
                return ReplicaRead(err, end, start, b"")
        except UnknownStreamError:
            self.forget(topic, partition)
            return ReplicaRead(ErrorCode.unknown_topic_or_partition, -1, -1, b"")
        if len(batches) == 1:
            payload = batches[0].payload
            data = payload if isinstance(payload, bytes) else bytes(payload)
        else:
            data = b"".join(b.payload for b in batches)
        if read_committed:
            data, to_leader = committed_prefix(data, offset)
            if to_leader:
                return ReplicaRead(ErrorCode.none, end, stream.start_offset, b"", to_leader=True)
        return ReplicaRead(ErrorCode.none, end, stream.start_offset, data)


def committed_prefix(data: bytes, offset: int) -> tuple[bytes, bool]:
    """The batches of ``data`` a read_committed consumer at ``offset`` may get
    without the partition's transaction state: those before the first
    transactional or control batch (batches wholly below ``offset`` are left
    out). Returns (records, whether a transactional or control batch is the
    first one at ``offset``: the leader must serve it)."""
    pos, end, first = 0, len(data), -1
    while pos + BATCH_HEADER_SIZE <= end:
        h = read_header(data, pos)
        if pos + h.size > end:
            break
        if h.last_offset >= offset:
            if h.is_transactional or h.is_control:
                if first < 0:
                    return b"", True
                break
            if first < 0:
                first = pos
        pos += h.size
    if first < 0:
        return b"", False
    return data[first:pos], False
