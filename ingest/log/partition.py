"""The Kafka partition log on top of one S3Stream ``Stream``.

Kafka offsets are stream offsets: a produced payload (one or more record
batches) is appended as one stream batch whose count is the number of offsets
it spans. This module checks and stamps batches (CRC, size, idempotence, base
offset, LogAppendTime), serves reads bounded by the high watermark (or, for
read_committed, the last stable offset), writes transaction markers, answers
offset look-ups and enforces retention. The transaction state itself is in
:mod:`ingest.log.txn_state`.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from ingest.errors import StorageError
from ingest.log.batch_check import INLINE_INFLATE_BYTES, Prepared, validate, validators
from ingest.log.producer_state import ProducerStateTable
from ingest.log.topic_config import TopicConfig
from ingest.log.txn_checkpoints import TxnCheckpointWriter
from ingest.log.txn_state import TxnCheckpointStore, TxnState
from ingest.protocol.errors import ErrorCode, KafkaError, error_class
from ingest.protocol.records import (
    CONTROL_COMMIT,
    BatchHeader,
    InflatedTooLargeError,
    RecordStats,
    build_control_batch,
    check_client_batch,
    control_marker,
    decode_records,
    patch_base_offset,
    set_log_append_time,
    set_max_timestamp,
    split_batches,
    stamp_batches,
)
from ingest.s3stream.api import Stream
from ingest.s3stream.errors import StreamBackpressureError

__all__ = [
    "PartitionLog",
    "AppendOutcome",
    "ReadResult",
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "DEFAULT_MAX_INFLATED_BYTES",
]

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_SCAN_CHUNK = 4 * 1024 * 1024
DEFAULT_MAX_INFLATED_BYTES = 100 * 1024 * 1024
"""How far a batch may inflate (or max.message.bytes, if larger): the broker's
default ``socket.request.max.bytes``, as records that big could not have been
sent uncompressed."""


def _timestamp_error(cfg: TopicConfig, stats: list[RecordStats], now: int) -> str | None:
    """message.timestamp.{before,after,difference}.max.ms, as Kafka checks them
    for CreateTime topics (only when set below their unbounded default)."""
    bounds = cfg.timestamp_bounds
    if bounds is None:
        return None
    before, after = bounds
    lo = min(s.min_timestamp for s in stats)
    hi = max(s.max_timestamp for s in stats)
    if now - lo > before:
        return f"timestamp {lo} is more than {before} ms before the broker's time {now}"
    if hi - now > after:
        return f"timestamp {hi} is more than {after} ms after the broker's time {now}"
    return None


def _durable_now(base_offset: int) -> asyncio.Future[int]:
    """The durable future of a batch known from before a restart: resolved."""
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    done.set_result(base_offset)
    return done


@dataclass(slots=True)
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    # The partition's own future of the append (resolves when acknowledged-
    # safe): it is kept for duplicate detection, so it must never be
    # cancelled. Watch it with callbacks, or await ``durable``.
    durable_future: asyncio.Future[int] | None = None
    throttled: bool = False  # refused for backpressure: the client should back off

    @property
    def durable(self) -> Awaitable[int] | None:
        """What to await for durability: the append's future behind a shield,
        so that a cancelled waiter (a client's disconnect) leaves it alone; a
        retry of the batch would otherwise get a cancelled future back."""
        fut = self.durable_future
        return None if fut is None else asyncio.shield(fut)


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes | None
    last_stable_offset: int = -1


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
        max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
        txn_store: TxnCheckpointStore | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.stream = stream
        self._config = config
        self.leader_epoch = leader_epoch
        self._clock_ms = clock_ms
        self.producers = ProducerStateTable()
        self.txn = TxnState()
        self.txn_checkpoints = TxnCheckpointWriter(
            txn_store,
            stream.stream_id,
            lambda: self.txn.checkpoint(self.high_watermark),
            f"{topic}-{partition}",
        )
        self._index: _BatchIndex | None = None
        self._index_lock = asyncio.Lock()
        self._appended: list[tuple[int, int, int, int]] = []  # before the index is built
        self._waiters: list[asyncio.Future[None]] = []
        self._max_inflated_bytes = max_inflated_bytes
        self._ordered: asyncio.Task[AppendOutcome] | None = None  # last append in the worker
        self.appended_bytes = 0  # record batch bytes appended here (bytes/s in status)
        self.fetched_bytes = 0  # record batch bytes read by fetches (the balancer's load)

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

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest ongoing transaction here, or the
        high watermark when none is ongoing (never above it)."""
        return self.txn.last_stable_offset(self.stream.confirm_offset)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction whose
        range meets [start, end), as a Fetch response lists them."""
        return [(a.producer_id, a.first_offset) for a in self.txn.aborted_between(start, end)]

    # --- produce ---------------------------------------------------------------
    def append(self, records: bytes | memoryview) -> AppendOutcome:
        """Validate, stamp and append a produce payload, all inline.

        Runs synchronously up to the stream append, so appends from concurrent
        callers keep their call order. Await ``outcome.durable`` before
        acknowledging. Compressed batches are inflated inline (bounded): the
        broker's produce path uses :meth:`submit`, which does that off the
        event loop.
        """
        prepared = self._prepare(records)
        if isinstance(prepared, AppendOutcome):
            return prepared
        try:
            stats = validate(prepared)
        except KafkaError as exc:
            return AppendOutcome(exc.error_code, message=str(exc))
        return self._commit(prepared, stats)

    def submit(self, records: bytes | memoryview) -> AppendOutcome | asyncio.Future[AppendOutcome]:
        """Like :meth:`append`, but a compressed payload that inflates past
        ``INLINE_INFLATE_BYTES`` is inflated and checked in a worker thread:
        the outcome is then a future.

        Appends still happen in the order ``submit`` was called: once one
        partition has a batch in the worker, later ones wait behind it (their
        own checks run meanwhile), so offsets and idempotent sequences keep
        request order. The future is never cancelled by a cancelled caller.
        """
        prepared = self._prepare(records)
        if isinstance(prepared, AppendOutcome):
            return prepared
        stats: list[RecordStats] | None = None
        error: KafkaError | None = None
        try:
            # bounded: a payload that inflates past the inline budget goes
            # to a worker, which checks it against its real limit
            stats = validate(prepared, min(prepared.inflate_limit, INLINE_INFLATE_BYTES))
        except InflatedTooLargeError as exc:
            if prepared.inflate_limit <= INLINE_INFLATE_BYTES:
                error = exc
        except KafkaError as exc:
            error = exc
        if self._ordered is None:
            if error is not None:
                return AppendOutcome(error.error_code, message=str(error))
            if stats is not None:
                return self._commit(prepared, stats)
        loop = asyncio.get_running_loop()
        checked: asyncio.Future[list[RecordStats]]
        if error is not None:
            checked = loop.create_future()
            checked.set_exception(error)
        elif stats is not None:
            checked = loop.create_future()
            checked.set_result(stats)
        else:
            checked = loop.run_in_executor(validators(), validate, prepared)
        task = loop.create_task(self._commit_in_order(self._ordered, checked, prepared))
        self._ordered = task
        task.add_done_callback(self._ordered_done)
        return task

    def _ordered_done(self, task: asyncio.Task[AppendOutcome]) -> None:
        if self._ordered is task:
            self._ordered = None

    async def _commit_in_order(
        self,
        previous: asyncio.Task[AppendOutcome] | None,
        checked: asyncio.Future[list[RecordStats]],
        prepared: Prepared,
    ) -> AppendOutcome:
        try:
            stats = await checked
        except KafkaError as exc:
            return AppendOutcome(exc.error_code, message=str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug in a check must not hang the partition
            log.exception("checking a batch for %s-%d failed", self.topic, self.partition)
            return AppendOutcome(ErrorCode.unknown_server_error, message=str(exc))
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        return self._commit(prepared, stats)

    def _restamped(
        self,
        buf: memoryview,
        headers: list[BatchHeader],
        stats: list[RecordStats],
        base: int,
        append_time: int,
    ) -> memoryview:
        """A copy of the batches with base offsets, leader epoch and the
        timestamps Kafka rewrites (``append_time`` >= 0: LogAppendTime; else a
        CreateTime batch's wrong maxTimestamp), their CRCs recomputed."""
        out = bytearray(buf)
        view = memoryview(out)
        offset = base
        for h, st in zip(headers, stats, strict=True):
            patch_base_offset(view, h.position, offset, self.leader_epoch)
            if append_time >= 0:
                set_log_append_time(view, h, append_time)
            elif st.max_timestamp != h.max_timestamp:
                set_max_timestamp(view, h, st.max_timestamp)  # as Kafka does
            offset += h.count
        return view

    def _prepare(self, records: bytes | memoryview) -> Prepared | AppendOutcome:
        """The checks that need no decompression: framing, CRC, header fields, size."""
        cfg = self._config()
        # read in place (a Produce request's records are a view into its
        # frame); _commit makes the one copy the log keeps
        buf = memoryview(records)
        try:
            headers = split_batches(buf)
            for h in headers:
                check_client_batch(h)
        except KafkaError as exc:
            return AppendOutcome(exc.error_code, message=str(exc))
        limit = cfg.max_message_bytes
        for h in headers:
            if h.size > limit:
                return AppendOutcome(
                    ErrorCode.message_too_large,
                    message=f"record batch of {h.size} bytes exceeds max.message.bytes {limit}",
                )
        return Prepared(buf, headers, cfg, max(limit, self._max_inflated_bytes), cfg.compact)

    def _commit(self, prepared: Prepared, stats: list[RecordStats]) -> AppendOutcome:
        """Stamp and append checked batches (synchronous up to the stream append)."""
        cfg, buf, headers = prepared.config, prepared.buf, prepared.headers
        now = self._clock_ms()
        if not cfg.log_append_time:
            error = _timestamp_error(cfg, stats, now)
            if error is not None:
                return AppendOutcome(ErrorCode.invalid_timestamp, message=error)
        first, last = headers[0], headers[-1]
        pid = first.producer_id
        if pid >= 0:
            first_seq = first.base_sequence
            last_seq = last.last_sequence
            check = self.producers.check(pid, first.producer_epoch, first_seq, last_seq)
            if check.error != ErrorCode.none:
                return AppendOutcome(check.error, log_start_offset=self.log_start_offset)
            if not first.is_transactional and pid in self.txn.ongoing:
                return AppendOutcome(
                    ErrorCode.invalid_txn_state,
                    log_start_offset=self.log_start_offset,
                    message=f"producer {pid} has a transaction ongoing here",
                )
            if check.duplicate_of is not None:
                dup = check.duplicate_of
                return AppendOutcome(
                    ErrorCode.none,
                    dup.base_offset,
                    -1,
                    self.log_start_offset,
                    durable_future=(
                        dup.done if dup.done is not None else _durable_now(dup.base_offset)
                    ),
                )
        base = self.stream.next_offset
        count = sum(h.count for h in headers)
        append_time = -1
        if cfg.log_append_time:
            append_time = max_ts = now
        else:
            max_ts = max(st.max_timestamp for st in stats)
        payload: bytes | memoryview
        if cfg.log_append_time or any(
            st.max_timestamp != h.max_timestamp for h, st in zip(headers, stats, strict=True)
        ):
            payload = self._restamped(buf, headers, stats, base, now if cfg.log_append_time else -1)
        else:  # the usual case: only fields outside the CRC change
            payload = stamp_batches(buf, headers, base, self.leader_epoch)
        try:
            durable = self.stream.append(payload, count)
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
            if first.is_transactional:
                self.txn.on_transactional_batch(pid, base)
                self.txn_checkpoints.seen = True
                if self.txn_checkpoints.saved is None:  # a first checkpoint before any marker
                    self.txn_checkpoints.save_soon()
        self._note_batch(base, base + count, len(buf), max_ts)
        self.appended_bytes += len(buf)
        return AppendOutcome(
            ErrorCode.none, base, append_time, self.log_start_offset, durable_future=fut
        )

    def write_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> AppendOutcome:
        """Append a commit or abort marker for ``producer_id``'s transaction
        (synchronous up to the stream append, like :meth:`append`; await
        ``outcome.durable``). An epoch below the producer's known one is
        INVALID_PRODUCER_EPOCH; a higher one becomes the known one, fencing
        the older. The producer's ongoing transaction here ends (an abort is
        indexed); without one, the marker is written all the same."""
        known = self.producers.epoch_of(producer_id)
        if known is not None and producer_epoch < known:
            return AppendOutcome(
                ErrorCode.invalid_producer_epoch,
                log_start_offset=self.log_start_offset,
                message=f"marker epoch {producer_epoch} is below the producer's {known}",
            )
        if self.txn.stale_coordinator(producer_id, coordinator_epoch):
            return AppendOutcome(
                ErrorCode.transaction_coordinator_fenced, log_start_offset=self.log_start_offset
            )
        now = self._clock_ms()
        buf = bytearray(
            build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now)
        )
        base = self.stream.next_offset
        patch_base_offset(buf, 0, base, self.leader_epoch)
        try:
            durable = self.stream.append(memoryview(buf), 1)
        except StreamBackpressureError as exc:
            return AppendOutcome(ErrorCode.kafka_storage_error, message=str(exc), throttled=True)
        except StorageError as exc:
            return AppendOutcome(
                ErrorCode.kafka_storage_error, message=f"storage unavailable: {exc}"
            )
        fut = asyncio.ensure_future(durable)
        fut.add_done_callback(self._wake_readers)
        fut.add_done_callback(self._marker_durable)
        self.producers.raise_epoch(producer_id, producer_epoch)
        self.txn.on_marker(producer_id, commit, base, coordinator_epoch)
        self.txn_checkpoints.seen = True
        self._note_batch(base, base + 1, len(buf), now)
        self.appended_bytes += len(buf)
        return AppendOutcome(
            ErrorCode.none, base, -1, self.log_start_offset, durable_future=fut
        )

    def _note_batch(self, base: int, end: int, size: int, max_ts: int) -> None:
        if self._index is not None:
            self._index.add(base, end, size, max_ts)
        else:
            self._appended.append((base, end, size, max_ts))

    async def rebuild_producer_state(self, window: int = 10_000) -> int:
        """Recover idempotent producers' recent batches and the transaction
        state from the log tail.

        Run once when a partition is opened after a restart or a move, so
        that a producer retrying a batch acknowledged just before the crash
        gets its original offset back instead of a duplicate, and so that
        transactions ongoing at the crash keep the last stable offset and
        their later markers end the right range. The transaction state comes
        from the partition's checkpoint plus a scan from its stable offset
        (without a checkpoint: from the window, as a log that never had one
        never had a transaction before it). Returns batches seen.
        """
        checkpoint = await self.txn_checkpoints.load()
        hw, log_start = self.high_watermark, self.log_start_offset
        recent = max(log_start, hw - window)
        txn_from = recent
        if checkpoint is not None:
            txn_from = max(log_start, min(checkpoint.stable_offset, hw))
        self.txn = TxnState.restore(checkpoint)
        self.txn.trim(log_start)
        seen = 0
        async for view, h, _ in self.scan(min(recent, txn_from)):
            pid = h.producer_id
            if pid >= 0 and h.is_transactional and h.base_offset >= txn_from:
                self.txn_checkpoints.seen = True
                if h.is_control:
                    kind, coordinator = control_marker(view, h)
                    self.txn.on_marker(pid, kind == CONTROL_COMMIT, h.base_offset, coordinator)
                else:
                    self.txn.on_transactional_batch(pid, h.base_offset)
            if pid >= 0:
                self._replay_producer(h)
            seen += 1
        if checkpoint is None and (self.txn.ongoing or self.txn.aborted):
            self.txn_checkpoints.save_soon()  # what the window found must not slide out
        return seen

    def _replay_producer(self, h: BatchHeader) -> None:
        if h.is_control:
            self.producers.raise_epoch(h.producer_id, h.producer_epoch)
            return
        check = self.producers.check(
            h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence
        )
        if check.error == ErrorCode.none:
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            done.set_result(h.base_offset)
            self.producers.record(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.last_sequence,
                h.base_offset,
                done,
            )

    # --- transaction checkpoints ---------------------------------------------------
    def _marker_durable(self, fut: asyncio.Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.txn_checkpoints.save_soon()

    async def save_txn_checkpoint(self, *, min_progress: int = 0) -> bool:
        """Write the transaction checkpoint now if it changed (see
        :meth:`TxnCheckpointWriter.save`)."""
        return await self.txn_checkpoints.save(min_progress=min_progress)

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

    async def read(self, offset: int, max_bytes: int, read_committed: bool = False) -> ReadResult:
        """Record batches from ``offset``, up to the high watermark, or for
        ``read_committed`` up to the last stable offset (batches as stored:
        the consumer drops aborted ones using :meth:`aborted_transactions`)."""
        hw = self.high_watermark
        lso = self.txn.last_stable_offset(hw)
        start = self.log_start_offset
        if offset < start or offset > hw:
            return ReadResult(ErrorCode.offset_out_of_range, hw, start, None, lso)
        end = lso if read_committed else hw
        if offset >= end:
            return ReadResult(ErrorCode.none, hw, start, b"", lso)
        batches = await self.stream.fetch(offset, end, max(1, max_bytes))
        if read_committed and batches and batches[-1].end_offset > end:
            # the LSO is where an append began, so never inside a stream batch;
            # should one span it anyway, its records past the LSO stay unread
            batches = [b for b in batches if b.end_offset <= end]
        if not batches:
            return ReadResult(ErrorCode.none, hw, start, b"", lso)
        if len(batches) == 1:
            payload = batches[0].payload
            data = payload if isinstance(payload, bytes) else bytes(payload)
        else:
            data = b"".join(batches_payloads(batches))
        self.fetched_bytes += len(data)
        return ReadResult(ErrorCode.none, hw, start, data, lso)

    async def scan(
        self, start: int, committed_only: bool = False
    ) -> AsyncIterator[tuple[memoryview, BatchHeader, int]]:
        """Yield (buffer, kafka batch header, stream batch end) from ``start``
        to the high watermark; ``committed_only``: to the last stable offset,
        without control batches and batches of aborted transactions."""
        offset = max(start, self.log_start_offset)
        hw = self.high_watermark
        aborted: dict[int, list[tuple[int, int]]] = {}
        if committed_only:
            hw = self.txn.last_stable_offset(hw)
            for a in self.txn.aborted_between(offset, hw):
                aborted.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        while offset < hw:
            batches = await self.stream.fetch(offset, hw, _SCAN_CHUNK)
            if not batches:
                return
            for sb in batches:
                view = memoryview(sb.payload)
                for h in split_batches(view, verify_crc=False):
                    if committed_only and h.is_transactional and _skipped(h, aborted):
                        continue
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
            # only what this process did not append is read (none of it for
            # a partition created here): a scan fetches 4 MiB before it can
            # stop, which the first retention pass did on the event loop for
            # every partition, a stall of tens of ms behind a burst
            if stop > self.log_start_offset:
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

    async def batch_index(self) -> list[tuple[int, int, int, int]]:
        """(base offset, end offset, bytes, max timestamp) of every stream
        batch from the log start to the high watermark (the log cleaner's
        view of the partition)."""
        idx = await self._ensure_index()
        start, hw = self.log_start_offset, self.high_watermark
        return [
            (b, e, z, t)
            for b, e, z, t in zip(idx.base, idx.end, idx.size, idx.max_ts, strict=True)
            if e > start and e <= hw
        ]

    def rewritten(self, end: int, entries: list[tuple[int, int, int, int]]) -> None:
        """The stream's batches below ``end`` were rewritten (log compaction)
        into ``entries`` (as :meth:`batch_index` lists them): the batch index
        takes them in place of its entries below ``end``."""
        idx = self._index
        if idx is None:
            return  # built from the log on first use
        start = self.log_start_offset
        new = _BatchIndex()
        for entry in entries:
            if entry[1] > start:
                new.add(*entry)
        for b, e, z, t in zip(idx.base, idx.end, idx.size, idx.max_ts, strict=True):
            if e > end:
                new.add(b, e, z, t)
        self._index = new

    async def retained_bytes(self) -> int:
        """Record batch bytes from the log start offset to the high watermark
        (read-only; builds the batch index on first use, as retention does)."""
        idx = await self._ensure_index()
        start = self.log_start_offset
        return sum(size for end, size in zip(idx.end, idx.size, strict=True) if end > start)

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
        """DeleteRecords: move the log start to ``before`` (-1: the high watermark).
        As Kafka, refused (POLICY_VIOLATION) unless cleanup.policy has delete."""
        if not self._config().delete:
            raise error_class(ErrorCode.policy_violation)(
                f"Records of partition {self.topic}-{self.partition} can not be deleted "
                "due to the configured policy"
            )
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
            if self.txn.trim(self.log_start_offset):
                self.txn_checkpoints.save_soon()
        return self.log_start_offset

    async def enforce_retention(self) -> int:
        """Trim by retention.ms and retention.bytes; returns the new log start offset."""
        cfg = self._config()
        if not cfg.delete or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
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
            self.txn.trim(self.log_start_offset)
        return self.log_start_offset


def _skipped(h: BatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """A control batch, or a batch of an aborted transaction."""
    if h.is_control:
        return True
    ranges = aborted.get(h.producer_id)
    return ranges is not None and any(lo <= h.base_offset <= hi for lo, hi in ranges)


def batches_payloads(batches: list) -> list[bytes | memoryview]:  # type: ignore[type-arg]
    return [b.payload for b in batches]
