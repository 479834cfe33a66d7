"""The Kafka partition log on top of one S3Stream ``Stream``.

Kafka offsets are stream offsets: a produced payload (one or more record
batches) is appended as one stream batch whose count is the number of offsets
it spans. This module checks and stamps batches (CRC, size, idempotence, base
offset, LogAppendTime), serves reads bounded by the high watermark, answers
offset look-ups and enforces retention.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from ingest.errors import StorageError
from ingest.log.producer_state import ProducerStateTable
from ingest.log.topic_config import TopicConfig
from ingest.protocol.errors import ErrorCode, KafkaError, error_class
from ingest.protocol.records import (
    BatchHeader,
    decode_records,
    patch_base_offset,
    set_log_append_time,
    split_batches,
    validate_records,
)
from ingest.s3stream.api import Stream
from ingest.s3stream.errors import StreamBackpressureError

__all__ = ["PartitionLog", "AppendOutcome", "ReadResult", "EARLIEST", "LATEST", "MAX_TIMESTAMP"]

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_SCAN_CHUNK = 4 * 1024 * 1024


@dataclass(slots=True)
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    durable: Awaitable[int] | None = None  # resolves when acknowledged-safe
    throttled: bool = False  # refused for backpressure: the client should back off


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes | None


class _BatchIndex:
    """Per stream batch: base offset, end offset, size and max timestamp."""

    __slots__ = ("base", "end", "size", "max_ts")

    def __init__(self) -> None:
        self.base = array("q")
        self.end = array("q")
        self.size = array("q")
        self.max_ts = array("q")

    def add(self, base: int, end: int, size: int, max_ts: int) -> None:
        self.base.append(base)
        self.end.append(end)
        self.size.append(size)
        self.max_ts.append(max_ts)

    def drop_below(self, offset: int) -> None:
        i = bisect.bisect_right(self.end, offset)
        if i:
            for a in (self.base, self.end, self.size, self.max_ts):
                del a[:i]


class PartitionLog:
    def __init__(
        self,
        topic: str,
        partition: int,
        stream: Stream,
        config: Callable[[], TopicConfig],
        leader_epoch: int = 0,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.stream = stream
        self._config = config
        self.leader_epoch = leader_epoch
        self._clock_ms = clock_ms
        self.producers = ProducerStateTable()
        self._index: _BatchIndex | None = None
        self._index_lock = asyncio.Lock()
        self._appended: list[tuple[int, int, int, int]] = []  # before the index is built
        self._waiters: list[asyncio.Future[None]] = []

    # --- offsets -------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.stream.confirm_offset

    @property
    def log_start_offset(self) -> int:
        return self.stream.start_offset

    @property
    def log_end_offset(self) -> int:
        return self.stream.next_offset

    # --- produce ---------------------------------------------------------------
    def append(self, records: bytes | memoryview) -> AppendOutcome:
        """Validate, stamp and append a produce payload.

        Runs synchronously up to the stream append, so appends from concurrent
        requests keep their call order. Await ``outcome.durable`` before
        acknowledging.
        """
        cfg = self._config()
        buf = bytearray(records)
        view = memoryview(buf)
        try:
            headers = split_batches(view)
            for h in headers:
                validate_records(view, h)
        except KafkaError as exc:
            return AppendOutcome(exc.error_code, message=str(exc))
        limit = cfg.max_message_bytes
        for h in headers:
            if h.size > limit:
                return AppendOutcome(
                    ErrorCode.message_too_large,
                    message=f"record batch of {h.size} bytes exceeds max.message.bytes {limit}",
                )
            if h.is_control:
                return AppendOutcome(
                    ErrorCode.invalid_record, message="clients may not write control batches"
                )
            if h.is_transactional:
                return AppendOutcome(
                    ErrorCode.invalid_record, message="transactional batches are not supported yet"
                )
        first, last = headers[0], headers[-1]
        pid = first.producer_id
        if pid >= 0:
            first_seq = first.base_sequence
            last_seq = last.last_sequence
            check = self.producers.check(pid, first.producer_epoch, first_seq, last_seq)
            if check.error != ErrorCode.none:
                return AppendOutcome(check.error, log_start_offset=self.log_start_offset)
            if check.duplicate_of is not None:
                dup = check.duplicate_of
                return AppendOutcome(
                    ErrorCode.none, dup.base_offset, -1, self.log_start_offset, durable=dup.done
                )
        base = self.stream.next_offset
        offset = base
        now = self._clock_ms()
        append_time = -1
        max_ts = -1
        for h in headers:
            patch_base_offset(view, h.position, offset, self.leader_epoch)
            if cfg.log_append_time:
                set_log_append_time(view, h, now)
                append_time = now
                max_ts = max(max_ts, now)
            else:
                max_ts = max(max_ts, h.max_timestamp)
            offset += h.count
        count = offset - base
        del view
        try:
            durable = self.stream.append(memoryview(buf), count)
        except StreamBackpressureError as exc:
            # Object storage is behind and the WAL is full: refuse before an
            # offset is taken; the client retries (KAFKA_STORAGE_ERROR is
            # retriable) after the throttle time the handler sets.
            return AppendOutcome(ErrorCode.kafka_storage_error, message=str(exc), throttled=True)
        except StorageError as exc:
            return AppendOutcome(
                ErrorCode.kafka_storage_error, message=f"storage unavailable: {exc}"
            )
        fut = asyncio.ensure_future(durable)
        fut.add_done_callback(self._wake_readers)
        if pid >= 0:
            self.producers.record(
                pid, first.producer_epoch, first.base_sequence, last.last_sequence, base, fut
            )
        self._note_batch(base, offset, len(buf), max_ts)
        return AppendOutcome(ErrorCode.none, base, append_time, self.log_start_offset, durable=fut)

    def _note_batch(self, base: int, end: int, size: int, max_ts: int) -> None:
        if self._index is not None:
            self._index.add(base, end, size, max_ts)
        else:
            self._appended.append((base, end, size, max_ts))

    async def rebuild_producer_state(self, window: int = 10_000) -> int:
        """Recover idempotent producers' recent batches from the log tail.

        Run once when a partition is opened after a restart, so that a
        producer retrying a batch acknowledged just before the crash gets its
        original offset back instead of a duplicate. Returns batches seen.
        """
        seen = 0
        async for _view, h, _ in self.scan(
            max(self.log_start_offset, self.high_watermark - window)
        ):
            if h.producer_id >= 0:
                done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                done.set_result(h.base_offset)
                if (
                    self.producers.check(
                        h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence
                    ).error
                    == ErrorCode.none
                ):
                    self.producers.record(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.last_sequence,
                        h.base_offset,
                        done,
                    )
            seen += 1
        return seen

    # --- fetch -----------------------------------------------------------------
    def _wake_readers(self, _fut: object = None) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def wait_for_data(self) -> asyncio.Future[None]:
        """A future resolved when the high watermark next moves."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._waiters) > 64:  # drop waiters whose fetch already returned
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(fut)
        return fut

    async def read(self, offset: int, max_bytes: int) -> ReadResult:
        hw = self.high_watermark
        start = self.log_start_offset
        if offset < start or offset > hw:
            return ReadResult(ErrorCode.offset_out_of_range, hw, start, None)
        if offset == hw:
            return ReadResult(ErrorCode.none, hw, start, b"")
        batches = await self.stream.fetch(offset, hw, max(1, max_bytes))
        if not batches:
            return ReadResult(ErrorCode.none, hw, start, b"")
        if len(batches) == 1:
            payload = batches[0].payload
            data = payload if isinstance(payload, bytes) else bytes(payload)
        else:
            data = b"".join(batches_payloads(batches))
        return ReadResult(ErrorCode.none, hw, start, data)

    async def scan(self, start: int) -> AsyncIterator[tuple[memoryview, BatchHeader, int]]:
        """Yield (buffer, kafka batch header, stream batch end) from ``start`` to the high watermark."""
        offset = max(start, self.log_start_offset)
        hw = self.high_watermark
        while offset < hw:
            batches = await self.stream.fetch(offset, hw, _SCAN_CHUNK)
            if not batches:
                return
            for sb in batches:
                view = memoryview(sb.payload)
                for h in split_batches(view, verify_crc=False):
                    yield view, h, sb.end_offset
                offset = sb.end_offset

    async def _ensure_index(self) -> _BatchIndex:
        if self._index is not None:
            return self._index
        async with self._index_lock:
            if self._index is not None:
                return self._index
            idx = _BatchIndex()
            stop = self._appended[0][0] if self._appended else self.high_watermark
            cur_base = -1
            cur = [0, 0, 0, -1]
            async for _view, h, sb_end in self.scan(self.log_start_offset):
                if h.base_offset >= stop:
                    break
                if cur_base != sb_end:  # a new stream batch
                    if cur_base != -1:
                        idx.add(*cur)
                    cur = [h.base_offset, sb_end, 0, -1]
                    cur_base = sb_end
                cur[2] += h.size
                cur[3] = max(cur[3], h.max_timestamp)
            if cur_base != -1:
                idx.add(*cur)
            for entry in self._appended:
                idx.add(*entry)
            self._appended = []
            self._index = idx
            return idx

    # --- offsets by time ---------------------------------------------------------
    async def offset_for(self, timestamp: int) -> tuple[int, int]:
        """ListOffsets: (offset, timestamp) for EARLIEST, LATEST, MAX_TIMESTAMP or a time.

        For a time: the earliest offset whose timestamp is >= it, or (-1, -1)
        when there is none.
        """
        if timestamp == LATEST:
            return self.high_watermark, -1
        if timestamp == EARLIEST:
            return self.log_start_offset, -1
        idx = await self._ensure_index()
        hw = self.high_watermark
        start = self.log_start_offset
        if timestamp == MAX_TIMESTAMP:
            best = (-1, -1)
            for i in range(len(idx.base)):
                if idx.end[i] <= start or idx.base[i] >= hw:
                    continue
                if idx.max_ts[i] > best[1]:
                    best = (i, idx.max_ts[i])
            if best[0] < 0:
                return -1, -1
            found = (-1, -1)
            async for view, h, _ in self.scan(idx.base[best[0]]):
                for r in decode_records(view, h):
                    if r.timestamp == best[1] and r.offset >= start:
                        found = (r.offset, r.timestamp)
                        break
                if found[0] >= 0 or h.base_offset >= idx.end[best[0]]:
                    break
            return found
        for i in range(len(idx.base)):
            if idx.end[i] <= start or idx.base[i] >= hw or idx.max_ts[i] < timestamp:
                continue
            async for view, h, _ in self.scan(max(idx.base[i], start)):
                if h.max_timestamp < timestamp:
                    continue
                for r in decode_records(view, h):
                    if r.offset >= start and r.timestamp >= timestamp:
                        return r.offset, r.timestamp
        return -1, -1

    # --- trimming ------------------------------------------------------------------
    async def delete_records(self, before: int) -> int:
        """DeleteRecords: move the log start to ``before`` (-1: the high watermark)."""
        hw = self.high_watermark
        if before == -1:
            before = hw
        if before < 0 or before > hw:
            raise error_class(ErrorCode.offset_out_of_range)(
                f"offset {before} is outside [0, {hw}]"
            )
        if before > self.log_start_offset:
            await self.stream.trim(before)
            if self._index is not None:
                self._index.drop_below(before)
        return self.log_start_offset

    async def enforce_retention(self) -> int:
        """Trim by retention.ms and retention.bytes; returns the new log start offset."""
        cfg = self._config()
        if cfg.retention_ms < 0 and cfg.retention_bytes < 0:
            return self.log_start_offset
        idx = await self._ensure_index()
        hw = self.high_watermark
        trim_to = self.log_start_offset
        n = len(idx.base)
        if cfg.retention_ms >= 0:
            cutoff = self._clock_ms() - cfg.retention_ms
            i = 0
            while i < n and idx.end[i] <= hw and idx.max_ts[i] < cutoff:
                trim_to = max(trim_to, idx.end[i])
                i += 1
        if cfg.retention_bytes >= 0:
            total = sum(idx.size[i] for i in range(n) if idx.end[i] > trim_to)
            i = 0
            while i < n and total > cfg.retention_bytes and idx.end[i] <= hw:
                if idx.end[i] > trim_to:
                    total -= idx.size[i]
                    trim_to = idx.end[i]
                i += 1
        if trim_to > self.log_start_offset:
            await self.stream.trim(trim_to)
            idx.drop_below(trim_to)
        return self.log_start_offset


def batches_payloads(batches: list) -> list[bytes | memoryview]:  # type: ignore[type-arg]
    return [b.payload for b in batches]
