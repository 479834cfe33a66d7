"""The transaction coordinator: Kafka's transaction state machine.

One record per transactional id (see ``model``), changed under a per-id lock
and written to the ``TxnStore`` before any answer depends on it. Ending a
transaction goes through a durable prepare state:

1. EndTxn (or a timeout, or a new producer's InitProducerId fencing the old
   one) moves the record to PrepareCommit / PrepareAbort and stores it;
2. a commit or abort marker is written into every partition of the
   transaction (``MarkerWriter``) and, on commit, the offsets committed in
   the transaction become the groups' offsets (``OffsetSink``);
3. the record becomes CompleteCommit / CompleteAbort, without partitions.

A crash between 1 and 3 leaves a prepared record; ``start`` finishes it (both
steps of 2 may be repeated safely: a second marker for a producer without an
open transaction in a partition changes nothing a reader sees, and offsets
are stored by value). A marker that cannot be written now (a partition
moving) is retried by the background sweep, which also aborts transactions
open for longer than their timeout, fencing their producer by bumping its
epoch as Kafka does.

Errors are returned as ``ErrorCode`` values (PRODUCER_FENCED where Kafka's
coordinator says so; handlers translate it for old request versions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ingest.protocol.errors import ErrorCode
from ingest.txn.model import PendingOffset, TxnRecord, TxnState
from ingest.txn.store import TxnStore

__all__ = ["TransactionCoordinator", "TxnConfig", "MarkerWriter", "OffsetSink", "InitResult"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_MAX_EPOCH = 32767  # Short.MAX_VALUE: epochs stay below it
_NONE = ErrorCode.none
Partition = tuple[str, int]


class MarkerWriter(Protocol):
    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[Partition],
    ) -> dict[Partition, ErrorCode]:
        """Write a commit or abort marker into each partition and wait until
        each is durable. A partition's NONE means its marker is durable, and
        so does UNKNOWN_TOPIC_OR_PARTITION (the topic is gone: nothing to
        end); any other code means "not now, try again"."""
        ...


class OffsetSink(Protocol):
    async def commit_transactional_offsets(
        self, group: str, offsets: Sequence[PendingOffset]
    ) -> None:
        """Make offsets committed in a transaction the group's committed
        offsets; raise when they could not be stored (the commit is retried)."""
        ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    sweep_interval_s: float = 1.0  # how often unfinished markers are retried
    abort_interval_s: float = 1.0  # how often transactions past their timeout are looked for
    coordinator_epoch: int = 0  # written into markers
    # a coordinator that may not be the only one to write these records (a
    # cluster's brokers share the store) reads the record before each change
    reread: bool = False


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(
        self,
        store: TxnStore,
        markers: MarkerWriter,
        offsets: OffsetSink,
        allocate_producer_id: Callable[[], int],
        config: TxnConfig | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        owns: Callable[[str], bool] = lambda _tid: True,
    ) -> None:
        self._store = store
        self._markers = markers
        self._offsets = offsets
        self._allocate = allocate_producer_id
        self.config = config or TxnConfig()
        self._clock_ms = clock_ms
        self._owns = owns
        self._records: dict[str, TxnRecord] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._last_abort_check_ms = -(1 << 62)

    def now_ms(self) -> int:
        return self._clock_ms()

    # --- life cycle ----------------------------------------------------------
    async def start(self) -> None:
        records = await asyncio.to_thread(self._store.all)
        self._records = {r.transactional_id: r for r in records}
        await self._sweep()  # finish what a crash left prepared
        self._sweeper = asyncio.ensure_future(self._sweep_forever())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.sweep_interval_s)
            try:
                await self._sweep()
            except Exception:  # noqa: BLE001 - the sweep must go on
                log.exception("transaction sweep failed")

    async def _sweep(self) -> None:
        """Abort timed-out transactions; finish prepared ones."""
        now = self._clock_ms()
        check_timeouts = now - self._last_abort_check_ms >= self.config.abort_interval_s * 1000
        if check_timeouts:
            self._last_abort_check_ms = now
        if self.config.reread:
            records = await asyncio.to_thread(self._store.all)
            self._records = {r.transactional_id: r for r in records}
        for tid, rec in list(self._records.items()):
            if not self._owns(tid):
                continue
            if rec.state.preparing:
                async with self._lock(tid):
                    current = await self._load(tid)
                    if current is not None and current.state.preparing:
                        await self._complete(current)
            elif (
                check_timeouts
                and rec.state is TxnState.ONGOING
                and now - rec.start_ms > rec.timeout_ms
            ):
                async with self._lock(tid):
                    current = await self._load(tid)
                    if (
                        current is not None
                        and current.state is TxnState.ONGOING
                        and now - current.start_ms > current.timeout_ms
                    ):
                        log.info(
                            "aborting transaction %r of producer %d: open for more than %d ms",
                            tid,
                            current.producer_id,
                            current.timeout_ms,
                        )
                        await self._abort_fencing(current)

    # --- helpers ---------------------------------------------------------------
    def _lock(self, tid: str) -> asyncio.Lock:
        lock = self._locks.get(tid)
        if lock is None:
            lock = self._locks[tid] = asyncio.Lock()
        return lock

    async def _io(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.to_thread(fn, *args)

    async def _load(self, tid: str) -> TxnRecord | None:
        if self.config.reread or tid not in self._records:
            rec = await self._io(self._store.get, tid)
            if rec is None:
                self._records.pop(tid, None)
            else:
                self._records[tid] = rec
        return self._records.get(tid)

    async def _save(self, rec: TxnRecord) -> None:
        rec.update_ms = self._clock_ms()
        await self._io(self._store.put, rec)
        self._records[rec.transactional_id] = rec

    @staticmethod
    def _check(rec: TxnRecord | None, producer_id: int, epoch: int) -> ErrorCode:
        if rec is None or rec.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if rec.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        return _NONE

    def _bumped(self, rec: TxnRecord) -> None:
        """The next epoch of ``rec``'s producer id, or a new producer id when
        the epochs are used up."""
        rec.last_producer_epoch = rec.producer_epoch
        if rec.producer_epoch + 1 >= _MAX_EPOCH - 1:
            rec.producer_id = self._allocate()
            rec.producer_epoch = 0
            rec.last_producer_epoch = -1
        else:
            rec.producer_epoch += 1

    async def _prepare(self, rec: TxnRecord, commit: bool) -> None:
        rec.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        await self._save(rec)

    async def _complete(self, rec: TxnRecord) -> bool:
        """Markers, offsets, then the complete state; False when a marker
        could not be written yet (the record stays prepared, the sweep retries)."""
        commit = rec.state is TxnState.PREPARE_COMMIT
        if rec.partitions:
            results = await self._markers.write_markers(
                rec.producer_id,
                rec.producer_epoch,
                commit,
                self.config.coordinator_epoch,
                sorted(rec.partitions),
            )
            pending = {
                tp: code
                for tp, code in results.items()
                if code not in (_NONE, ErrorCode.unknown_topic_or_partition)
            }
            if pending:
                log.warning(
                    "transaction %r: %s marker not written yet to %s; will retry",
                    rec.transactional_id,
                    "commit" if commit else "abort",
                    ", ".join(f"{t}-{p} ({c.name})" for (t, p), c in sorted(pending.items())),
                )
                return False
        tid = rec.transactional_id
        try:
            if commit and rec.groups:
                stored = await self._io(self._store.get_offsets, tid)
                for group, offsets in sorted(stored.items()):
                    if group in rec.groups:
                        await self._offsets.commit_transactional_offsets(
                            group, sorted(offsets.values(), key=lambda o: (o.topic, o.partition))
                        )
            # gone before the record says complete: the next transaction of
            # this id must not find them
            await self._io(self._store.delete_offsets, tid)
        except Exception:  # noqa: BLE001 - retried by the sweep
            log.exception("transaction %r: storing its offsets failed; will retry", tid)
            return False
        rec.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        rec.partitions = set()
        rec.groups = set()
        rec.start_ms = -1
        await self._save(rec)
        return True

    async def _abort_fencing(self, rec: TxnRecord) -> bool:
        """Abort ``rec``'s open transaction with a bumped epoch, so that its
        producer (a zombie, or one past its timeout) is fenced everywhere."""
        self._bumped(rec)
        await self._prepare(rec, commit=False)
        return await self._complete(rec)

    # --- InitProducerId ----------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitResult:
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
            if rec is None:
                if producer_id >= 0:
                    return InitResult(ErrorCode.invalid_producer_id_mapping)
                pid = await self._io(self._allocate)
                rec = TxnRecord(transactional_id, pid, 0, timeout_ms)
                await self._save(rec)
                return InitResult(_NONE, pid, 0)
            if producer_id >= 0:
                # KIP-360: the producer names the id and epoch it has.
                if producer_id != rec.producer_id:
                    return InitResult(ErrorCode.invalid_producer_id_mapping)
                if producer_epoch == rec.last_producer_epoch and rec.state.idle:
                    # a retry of the InitProducerId that bumped it: same answer
                    return InitResult(_NONE, rec.producer_id, rec.producer_epoch)
                if producer_epoch != rec.producer_epoch:
                    return InitResult(ErrorCode.producer_fenced)
            if rec.state.preparing:
                # finish the previous transaction first; the client retries
                if not await self._complete(rec):
                    return InitResult(ErrorCode.concurrent_transactions)
            if rec.state is TxnState.ONGOING:
                # a new producer with this id: abort the old one's transaction
                # with a bumped epoch (fencing it), then bump once more for the
                # new producer (its sequences start afresh)
                if not await self._abort_fencing(rec):
                    return InitResult(ErrorCode.concurrent_transactions)
            self._bumped(rec)
            rec.timeout_ms = timeout_ms
            rec.state = TxnState.EMPTY
            await self._save(rec)
            return InitResult(_NONE, rec.producer_id, rec.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit --------------------
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[Partition],
    ) -> ErrorCode:
        """Add partitions (all existing; the caller answers unknown ones)."""
        wanted = set(partitions)
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
            code = self._check(rec, producer_id, producer_epoch)
            if code != _NONE:
                return code
            assert rec is not None
            if rec.state.preparing:
                return ErrorCode.concurrent_transactions
            if rec.state is TxnState.ONGOING and wanted <= rec.partitions:
                return _NONE
            self._begin(rec)
            rec.partitions |= wanted
            await self._save(rec)
            return _NONE

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[Partition],
    ) -> dict[Partition, ErrorCode]:
        """AddPartitionsToTxn's verify-only form: is each partition in the
        open transaction of this producer?"""
        wanted = list(partitions)
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
        code = self._check(rec, producer_id, producer_epoch)
        if code != _NONE:
            return {tp: code for tp in wanted}
        assert rec is not None
        ongoing = rec.state is TxnState.ONGOING
        return {
            tp: _NONE if ongoing and tp in rec.partitions else ErrorCode.invalid_txn_state
            for tp in wanted
        }

    def _begin(self, rec: TxnRecord) -> None:
        if rec.state is not TxnState.ONGOING:
            rec.state = TxnState.ONGOING
            rec.start_ms = self._clock_ms()
            rec.partitions = set()
            rec.groups = set()

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group: str
    ) -> ErrorCode:
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
            code = self._check(rec, producer_id, producer_epoch)
            if code != _NONE:
                return code
            assert rec is not None
            if rec.state.preparing:
                return ErrorCode.concurrent_transactions
            if rec.state is TxnState.ONGOING and group in rec.groups:
                return _NONE
            self._begin(rec)
            rec.groups.add(group)
            await self._save(rec)
            return _NONE

    async def commit_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        offsets: Sequence[PendingOffset],
    ) -> ErrorCode:
        """TxnOffsetCommit: remember offsets until the transaction ends.

        Called on the broker that coordinates ``group``, which in a cluster
        may not coordinate the transaction: it reads the transaction's
        record (never writes it) and writes only its own entry of offsets."""
        async with self._lock(transactional_id):
            rec = await self._io(self._store.get, transactional_id)
            code = self._check(rec, producer_id, producer_epoch)
            if code != _NONE:
                return code
            assert rec is not None
            if rec.state is not TxnState.ONGOING or group not in rec.groups:
                # AddOffsetsToTxn comes first, as every client does
                return ErrorCode.invalid_txn_state
            stored = await self._io(self._store.get_offsets, transactional_id)
            pending = stored.get(group, {})
            for o in offsets:
                pending[(o.topic, o.partition)] = o
            await self._io(self._store.put_offsets, transactional_id, group, pending)
            return _NONE

    # --- EndTxn --------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
            code = self._check(rec, producer_id, producer_epoch)
            if code != _NONE:
                return code
            assert rec is not None
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if rec.state is done:
                return _NONE  # a retry of an EndTxn that went through
            if rec.state.preparing:
                wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
                if rec.state is not wanted:
                    return ErrorCode.invalid_txn_state
                await self._complete(rec)
                return _NONE
            if rec.state is not TxnState.ONGOING:
                return ErrorCode.invalid_txn_state
            await self._prepare(rec, commit)
            # The outcome is decided (and stored); markers that cannot be
            # written now are retried, and the next transaction waits for them.
            await self._complete(rec)
            return _NONE

    # --- what other parts of the broker ask ------------------------------------------
    def produce_check(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partition: Partition
    ) -> ErrorCode:
        """May this producer write a transactional batch to ``partition``?
        (Only for ids this coordinator knows; others are not checked here.)"""
        rec = self._records.get(transactional_id)
        if rec is None or self.config.reread:
            return _NONE
        if rec.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch < rec.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if rec.state is not TxnState.ONGOING or partition not in rec.partitions:
            return ErrorCode.invalid_txn_state
        return _NONE

    def pending_offsets(self, group: str) -> set[Partition]:
        """Partitions of ``group`` with an offset committed in a transaction
        not ended yet (OffsetFetch with require_stable answers them
        UNSTABLE_OFFSET_COMMIT). Blocking: call it from a worker thread."""
        return self._store.pending_partitions(group)

    async def describe(self, transactional_id: str) -> TxnRecord | None:
        async with self._lock(transactional_id):
            rec = await self._load(transactional_id)
        return None if rec is None else rec.copy()

    async def list(self) -> list[TxnRecord]:
        if self.config.reread:
            records = await asyncio.to_thread(self._store.all)
            return [r for r in records if self._owns(r.transactional_id)]
        return [r.copy() for _, r in sorted(self._records.items())]
