"""Fetch (key 1): long-poll reads bounded by max wait, min bytes and max bytes.

Reads stop at the high watermark (the durable end), so a consumer never sees a
record that a crash could take back. isolation_level READ_COMMITTED (1) reads
stop at the last stable offset (the first offset of the oldest open
transaction), and the response lists the aborted transactions that meet the
records returned, so the consumer drops their batches; every partition
response carries the last stable offset, for either isolation level.

Size limits follow Kafka (KIP-74): the first record batch of the first
partition that has data is returned whole even when it exceeds ``max_bytes``
or its ``partition_max_bytes``, so that a consumer always makes progress;
every other partition gets only the whole batches that fit both its own limit
and what is left of ``max_bytes``. A client sizes its receive buffer from
``max_bytes`` (librdkafka drops a connection whose response is larger).

A broker that is shutting down answers a waiting Fetch at once with what it has.

Racks (KIP-392, v11+): a consumer that sends its rack (``client.rack``) is
sent by a partition's leader in another rack to a broker of its own rack
(:func:`ingest.cluster.racks.preferred_read_replica`): the leader answers that
partition with no records, its offsets and ``preferred_read_replica``, and
that broker serves the partition from object storage
(:class:`ingest.replica.ReplicaReader`): records up to what the leader has
uploaded, so the replica's tail lags the leader by about one upload interval;
a fetch past that end waits there instead of failing. A broker that does not
lead a partition serves it only to a consumer that sent a rack, and sends a
consumer for whom another broker is preferred on to it (or to the leader).

A consumer may instead announce its rack in ``client.id``
(``tidelake_rack=<rack>``, any Fetch version): Metadata then names the broker
of its rack as the leader (:mod:`ingest.handlers.metadata`), and that broker
serves it from object storage as above. Such a consumer is never sent
elsewhere with ``preferred_read_replica`` (a client before v11 has no such
field): a broker that is not the one for its rack answers
NOT_LEADER_OR_FOLLOWER (it refreshes its metadata), and the leader serves it
itself. A ``client.rack`` sent with v11+ takes precedence over the token.

Transactions: a replica has no transaction state (last stable offset, aborted
transactions), so read_committed consumers get only non-transactional batches
from it; a transactional or control batch at their offset sends them to the
leader (``preferred_read_replica`` = leader), and the leader then serves the
partition itself while its read there meets transactional data or an open
transaction, and sends them back once it does not. read_uncommitted consumers
get every batch from the replica, as from the leader. A consumer that
announced its rack only in ``client.id`` is not sent to the leader: the replica
reads that partition from the leader for it
(:func:`ingest.handlers.led_elsewhere.fetch_from_leader`).

The response is built as a version 12 entity; the dispatcher narrows it for
older versions.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union, cast

from kio.schema.fetch import v4, v5, v6, v7, v8, v9, v10, v11, v12
from kio.schema.fetch.v12.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import Records, i32, i32Timedelta, i64

from ingest.cluster.racks import FETCH, client_id_rack, preferred_read_replica
from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.handlers.led_elsewhere import fetch_from_leader
from ingest.handlers.produce import MOVE_WAIT_S
from ingest.log.partition import PartitionLog
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import BATCH_HEADER_SIZE, read_header
from ingest.security import quota_enforce as quotas
from ingest.security.acl import enforce as acl

__all__ = ["handle", "FetchRequest"]

FetchRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v4.FetchRequest,
    v5.FetchRequest,
    v6.FetchRequest,
    v7.FetchRequest,
    v8.FetchRequest,
    v9.FetchRequest,
    v10.FetchRequest,
    v11.FetchRequest,
    v12.FetchRequest,
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_MAX_INT32 = 0x7FFFFFFF
# A record batch header: base offset (8 bytes), then the batch length (4)
# counting the bytes after it. The smallest valid batch is 61 bytes.
_BATCH_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_LAST_DELTA_AT = 23  # lastOffsetDelta: after offset, length, leader epoch, magic, CRC, attributes
_LOG_OVERHEAD = 12
_MIN_BATCH = 61
_READ_COMMITTED = 1
_RACK_AWARE_VERSION = 11  # Fetch v11 added rack_id and preferred_read_replica


@dataclass(frozen=True, slots=True)
class _Racks:
    """A rack-aware consumer fetch: the client's rack and the cluster as seen now.
    ``redirect``: the consumer sent ``client.rack`` (v11+) and may be sent to
    another broker with ``preferred_read_replica``; False when its rack comes
    from its ``client.id`` only."""

    client_rack: str
    node_id: int
    brokers: Sequence[BrokerEndpoint]
    redirect: bool = True


@dataclass(slots=True)
class _Round:
    """One pass over the wanted partitions."""

    total: int
    topics: dict[str, list[PartitionData]]
    logs: list[PartitionLog]
    replica_waiting: bool = False  # a partition served here from objects has nothing yet
    redirected: bool = False  # a partition was answered with a preferred read replica


def _client_rack(ctx: RequestContext, request: FetchRequest) -> tuple[str, bool]:
    """(the consumer's rack, whether it sent it as ``client.rack``)."""
    rack = getattr(request, "rack_id", "") or "" if ctx.api_version >= _RACK_AWARE_VERSION else ""
    if rack:
        return rack, True
    return client_id_rack(ctx.client_id), False


def _racks(ctx: RequestContext, request: FetchRequest) -> _Racks | None:
    broker = ctx.broker
    rack, sent = _client_rack(ctx, request)
    if not rack or int(request.replica_id) >= 0 or not broker.cluster.clustered:
        return None
    return _Racks(rack, broker.cluster.node_id, broker.cluster.brokers(), sent)


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    max_wait_s = min(request.max_wait.total_seconds(), broker.config.fetch_max_wait_cap_ms / 1000)
    min_bytes = max(0, int(request.min_bytes))
    max_bytes = int(request.max_bytes)
    if max_bytes <= 0:
        max_bytes = _MAX_INT32
    deadline = time.monotonic() + max_wait_s
    committed = int(request.isolation_level) == _READ_COMMITTED
    wanted: list[tuple[str, int, int, int]] = []
    for t in request.topics:
        for p in t.partitions:
            wanted.append((t.topic, p.partition, p.fetch_offset, p.partition_max_bytes))
    racks = _racks(ctx, request)
    if broker.cluster.clustered:
        # partitions moving to or from this broker: answer once they settled
        # (a rack-aware consumer is served a partition led elsewhere from objects)
        wait = min(MOVE_WAIT_S, max(1.0, max_wait_s))
        logs_mgr = broker.logs
        missing = {
            (t, p)
            for t, p, _, _ in wanted
            if logs_mgr.partition(t, p) is None and (racks is None or logs_mgr.moving(t, p))
        }
        if missing:
            await asyncio.gather(*(broker.await_partition(t, p, wait) for t, p in missing))
    stopping = broker.stopping
    while True:
        rnd = await _read_all(ctx, wanted, max_bytes, committed, racks)
        total, topics = rnd.total, rnd.topics
        remaining = deadline - time.monotonic()
        if (
            total >= min_bytes
            or remaining <= 0
            or not (rnd.logs or rnd.replica_waiting)
            or rnd.redirected
            or stopping.done()
            or _any_error(topics)
        ):
            break
        waiters = [log.wait_for_data() for log in rnd.logs]
        if rnd.replica_waiting:  # the next upload: look again in a while
            delay = min(remaining, broker.replica_reader.refresh_s)
            waiters.append(asyncio.ensure_future(asyncio.sleep(delay)))
        try:
            await asyncio.wait(
                [*waiters, stopping], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for w in waiters:
                w.cancel()
    broker.rack_traffic.add(_client_rack(ctx, request)[0], FETCH, total)
    return FetchResponse(
        throttle_time=await quotas.fetch_throttle(ctx, total),
        error_code=ErrorCode.none,
        session_id=cast(i32, 0),
        responses=tuple(
            FetchableTopicResponse(topic=cast(TopicName, name), partitions=tuple(parts))
            for name, parts in topics.items()
        ),
    )


def _any_error(topics: dict[str, list[PartitionData]]) -> bool:
    return any(p.error_code != ErrorCode.none for parts in topics.values() for p in parts)


def _partition(
    index: int,
    error: ErrorCode,
    hw: int,
    start: int,
    records: bytes | None,
    lso: int = -1,
    aborted: tuple[AbortedTransaction, ...] | None = None,
    preferred: int = -1,
) -> PartitionData:
    # cast, not i32(...)/i64(...): these are the log's own offsets, and the
    # phantom types' runtime check would cost more than the rest of the entity.
    return PartitionData(
        partition_index=cast(i32, index),
        error_code=error,
        high_watermark=cast(i64, hw),
        last_stable_offset=cast(i64, lso if lso >= 0 else hw),
        log_start_offset=cast(i64, start),
        aborted_transactions=aborted,
        # Kafka sends empty (never null) records, even with an error:
        # librdkafka rejects a null record set as a bad message.
        records=cast(Records, records if records is not None else b""),
        preferred_read_replica=cast(BrokerId, preferred),
    )


def whole_batches(records: bytes, limit: int, *, at_least_one: bool) -> bytes:
    """The longest prefix of ``records`` made of whole record batches and at
    most ``limit`` bytes long; with ``at_least_one``, at least the first batch."""
    if len(records) <= limit:
        return records
    pos = 0
    end = len(records)
    while pos + _LOG_OVERHEAD <= end:
        (length,) = _BATCH_LENGTH.unpack_from(records, pos + 8)
        nxt = pos + _LOG_OVERHEAD + length
        if length < 0 or nxt > end or (nxt > limit and not (at_least_one and pos == 0)):
            break
        pos = nxt
    return records[:pos]


def _records_end(records: bytes) -> int:
    """The offset after the last whole record batch of ``records``."""
    pos, end, last = 0, len(records), -1
    while pos + _LAST_DELTA_AT + 4 <= end:
        (length,) = _BATCH_LENGTH.unpack_from(records, pos + 8)
        if length < 0 or pos + _LOG_OVERHEAD + length > end:
            break
        (base,) = _OFFSET.unpack_from(records, pos)
        (delta,) = _BATCH_LENGTH.unpack_from(records, pos + _LAST_DELTA_AT)
        last = base + delta
        pos += _LOG_OVERHEAD + length
    return last + 1


def _aborted(
    log: PartitionLog, offset: int, records: bytes | None
) -> tuple[AbortedTransaction, ...]:
    """The aborted transactions a read_committed consumer needs for ``records``."""
    if not records:
        return ()
    meeting = log.aborted_transactions(offset, log.high_watermark)
    if not meeting:  # the usual case: no walk over the batches
        return ()
    end = _records_end(records)
    return tuple(
        AbortedTransaction(producer_id=cast(ProducerId, pid), first_offset=cast(i64, first))
        for pid, first in meeting
        if first < end
    )


async def _read_all(
    ctx: RequestContext,
    wanted: list[tuple[str, int, int, int]],
    max_bytes: int,
    committed: bool,
    racks: _Racks | None,
) -> _Round:
    logs_mgr = ctx.broker.logs
    rnd = _Round(0, {}, [])
    for topic, partition, offset, part_max in wanted:
        parts = rnd.topics.setdefault(topic, [])
        if (denied := acl.topic_denied(ctx, topic, acl.AclOperation.READ)) is not None:
            parts.append(_partition(partition, denied[0], -1, -1, b""))
            continue
        log = logs_mgr.partition(topic, partition)
        if log is None:
            if racks is not None and logs_mgr.has_partition(topic, partition):
                parts.append(
                    await _from_replica(
                        ctx, rnd, racks, topic, partition, offset, part_max, max_bytes, committed
                    )
                )
                continue
            err = logs_mgr.partition_error(topic, partition)
            parts.append(_partition(partition, err, -1, -1, b""))
            continue
        rnd.logs.append(log)
        # Only the first partition with data may go over its limits (KIP-74).
        first = rnd.total == 0
        limit = min(part_max, max_bytes - rnd.total)
        hw, start = log.high_watermark, log.log_start_offset
        aborted = () if committed else None
        elsewhere = _elsewhere(racks, topic, partition)
        if elsewhere is not None and start <= offset <= hw and not committed:
            rnd.redirected = True
            lso = log.last_stable_offset
            parts.append(
                _partition(partition, ErrorCode.none, hw, start, b"", lso, aborted, elsewhere)
            )
            continue
        if not first and limit < _MIN_BATCH:
            err = ErrorCode.offset_out_of_range if not start <= offset <= hw else ErrorCode.none
            lso = log.last_stable_offset
            parts.append(_partition(partition, err, hw, start, b"", lso, aborted))
            continue
        res = await log.read(offset, max(limit, 1), read_committed=committed)
        records = res.records
        if (
            elsewhere is not None
            and res.error == ErrorCode.none
            and _replica_can_serve(res.records, res.last_stable_offset, res.high_watermark)
        ):
            rnd.redirected = True
            parts.append(
                _partition(
                    partition,
                    ErrorCode.none,
                    res.high_watermark,
                    res.log_start_offset,
                    b"",
                    res.last_stable_offset,
                    (),
                    elsewhere,
                )
            )
            continue
        if records and len(records) > limit:
            records = whole_batches(records, max(limit, 0), at_least_one=first)
        rnd.total += len(records) if records else 0
        parts.append(
            _partition(
                partition,
                res.error,
                res.high_watermark,
                res.log_start_offset,
                records,
                res.last_stable_offset,
                _aborted(log, offset, records) if committed else None,
            )
        )
    return rnd


def _elsewhere(racks: _Racks | None, topic: str, partition: int) -> int | None:
    """The broker a rack-aware consumer should read this led partition from, if not here."""
    if racks is None or not racks.redirect:
        return None
    return preferred_read_replica(topic, partition, racks.client_rack, racks.node_id, racks.brokers)


def _replica_can_serve(records: bytes | None, lso: int, hw: int) -> bool:
    """For a read_committed consumer: the replica (which cannot filter
    transactions) can serve what the leader read here, as it holds no
    transactional or control batch; and when nothing was read, no open
    transaction holds the consumer here (it would bounce back at once)."""
    if not records:
        return lso >= hw
    pos, end = 0, len(records)
    while pos + BATCH_HEADER_SIZE <= end:
        h = read_header(records, pos)
        if h.is_transactional or h.is_control:
            return False
        pos += h.size
    return True


async def _from_replica(
    ctx: RequestContext,
    rnd: _Round,
    racks: _Racks,
    topic: str,
    partition: int,
    offset: int,
    part_max: int,
    max_bytes: int,
    committed: bool,
) -> PartitionData:
    """A partition another broker leads, for a rack-aware consumer: served here
    from object storage when this broker is the consumer's preferred replica,
    else the consumer is sent on to the one that is (or to the leader)."""
    broker = ctx.broker
    reader = broker.replica_reader
    leader = broker.cluster.leader(topic, partition)[0]
    preferred = preferred_read_replica(topic, partition, racks.client_rack, leader, racks.brokers)
    aborted = () if committed else None
    if preferred != racks.node_id:
        target = preferred if preferred is not None else leader
        if target >= 0 and target != racks.node_id:  # else: led here, not open yet
            if not racks.redirect:  # routed here by stale metadata: it refreshes
                return _partition(partition, ErrorCode.not_leader_or_follower, -1, -1, b"")
            rnd.redirected = True
            hw, start = reader.known_offsets(topic, partition)
            return _partition(partition, ErrorCode.none, hw, start, b"", hw, aborted, target)
    first = rnd.total == 0
    limit = min(part_max, max_bytes - rnd.total)
    res = await reader.read(topic, partition, offset, max(limit, 1), read_committed=committed)
    if res.to_leader and leader >= 0 and leader != racks.node_id:
        if not racks.redirect:
            return await _through_leader(ctx, rnd, topic, partition, offset, limit, first)
        rnd.redirected = True
        hw, start = res.high_watermark, res.log_start_offset
        return _partition(partition, ErrorCode.none, hw, start, b"", hw, aborted, leader)
    records = res.records
    if records and len(records) > limit:
        records = whole_batches(records, max(limit, 0), at_least_one=first)
    if res.error == ErrorCode.none and not records:
        rnd.replica_waiting = True
    rnd.total += len(records)
    hw, start = res.high_watermark, res.log_start_offset
    return _partition(partition, res.error, hw, start, records, hw, aborted)


async def _through_leader(
    ctx: RequestContext,
    rnd: _Round,
    topic: str,
    partition: int,
    offset: int,
    limit: int,
    first: bool,
) -> PartitionData:
    """A read_committed consumer routed here by its ``client.id`` meets
    transactional data: the leader's answer, read for it (or, when the leader
    does not answer, NOT_LEADER_OR_FOLLOWER: retriable)."""
    data = await fetch_from_leader(ctx, topic, partition, offset, max(limit, 1))
    if data is None:
        return _partition(partition, ErrorCode.not_leader_or_follower, -1, -1, b"")
    records = bytes(data.records or b"")
    if records and len(records) > limit:
        records = whole_batches(records, max(limit, 0), at_least_one=first)
    if data.error_code == ErrorCode.none and not records:
        rnd.replica_waiting = True  # e.g. at an open transaction: look again in a while
    rnd.total += len(records)
    return _partition(
        partition,
        ErrorCode(data.error_code),
        int(data.high_watermark),
        int(data.log_start_offset),
        records,
        int(data.last_stable_offset),
        data.aborted_transactions or (),
    )
