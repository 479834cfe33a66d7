"""One coordinator per table topic: runs the partition workers and makes ONE commit per interval.

Cycle: workers queue converted chunks; the coordinator drains them until the
commit interval has passed (or ``max_rows_per_commit`` rows are pending, so a
backlog commits in bounded chunks), writes the chunks' dead letters, then
commits all rows with the next offset of every partition in one Iceberg
snapshot. A backlog (more than ``max_rows_per_commit`` offsets still to convert
when a full commit is made) commits as fast as it is converted: the commit
that brings the table up to the end of the log follows as soon as the last
chunk is converted, rather than an interval later (60 s by default). Any
failure (catalog down, commit conflict, fatal data error) discards what is
pending, and the cycle restarts from the offsets in the table:
the table and the offsets it records never disagree.

The partitions are those this broker serves (``Topic.logs``): all of them on a
single broker; in a cluster, those it leads, and every broker runs a coordinator
that commits its own partitions (see ``commit.py``: per-partition
compare-and-merge). When the set changes (a leader move, CreatePartitions), the
pending rows of the partitions still served are committed, those of a partition
that left are dropped uncommitted (its new leader converts them from the
table's offset), and the cycle starts again from the table for the new set.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from contextlib import aclosing, suppress
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog

from ingest.log.manager import LogManager, Topic
from ingest.protocol.records import BatchHeader, Record, decode_records
from table_topic.commit import CommitResult
from table_topic.config import ErrorsTolerance, TableTopicConfig
from table_topic.convert.chunk import ConvertedChunk, DeadLetter, convert_batches
from table_topic.convert.pool import ProcessConverter
from table_topic.decode.resolver import SchemaResolver
from table_topic.delta.location import DeltaLocation
from table_topic.dlq import DeadLetterWriter
from table_topic.errors import TableTopicError
from table_topic.settings import TableTopicSettings
from table_topic.sink import TableSink, open_sink
from table_topic.status import TopicStatus
from table_topic.worker import PartitionWorker

__all__ = ["TopicCoordinator", "CoordinatorDeps"]

log = logging.getLogger(__name__)

_QUEUE_CHUNKS = 4


@dataclass
class CoordinatorDeps:
    settings: TableTopicSettings
    logs: LogManager
    catalog: Catalog
    resolver: SchemaResolver
    executor: Executor
    converter: ProcessConverter | None = None
    # Paces table writes: awaited with the bytes a commit is about to write
    # (the broker's network rate limiter, table-write share), or None.
    throttle: Callable[[int], Awaitable[None]] | None = None
    # Where Delta tables live (table.topic.format=delta|both); None: nowhere known.
    delta: DeltaLocation | None = None


class TopicCoordinator:
    def __init__(
        self, topic: Topic, cfg: TableTopicConfig, deps: CoordinatorDeps, status: TopicStatus
    ) -> None:
        self.topic = topic
        self.cfg = cfg
        self.deps = deps
        self.status = status
        self._task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Future[Any] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._commits_started = 0
        self._stopping = False

    def _fault(self, point: str) -> None:
        """Crash tests: die like kill -9 at ``settings.fault_point`` of the N-th commit."""
        s = self.deps.settings
        if s.fault_point == point and self._commits_started >= s.fault_after_commits:
            log.error("fault injection: exiting at %s", point)
            os._exit(137)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"table-topic:{self.cfg.topic}")

    async def stop(self) -> None:
        """Stop, waiting for a commit already handed to the catalog (never two writers)."""
        self._stopping = True
        task = self._task
        while task is not None and not task.done():
            # Python 3.11's wait_for can swallow a cancel that arrives as its inner
            # wait completes; the loop then runs on, and a restart for a new config
            # waited for it for ever. Cancel again until the task has ended.
            task.cancel()
            await asyncio.wait({task}, timeout=0.5)
        if task is not None:
            with suppress(asyncio.CancelledError, Exception):
                await task
        await self._stop_workers()
        if self._inflight is not None:
            with suppress(BaseException):
                await self._inflight
        self.status.state = "stopped"

    async def _stop_workers(self) -> None:
        pending = {w for w in self._workers if not w.done()}
        while pending:  # cancel again if a cancel was swallowed (see stop)
            for w in pending:
                w.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        for w in self._workers:
            with suppress(asyncio.CancelledError, Exception):
                await w
        self._workers = []

    async def _blocking(self, fn: Any, *args: Any) -> Any:
        """Run blocking work in the pool; a cancelled caller still lets it finish (see stop)."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self.deps.executor, fn, *args)
        self._inflight = fut
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                self._inflight = None

    async def _run(self) -> None:
        backoff = self.deps.settings.retry_backoff_ms / 1000
        while not self._stopping:
            try:
                await self._cycle()
                continue  # the partition count changed: start again at once
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "table topic %s: %s",
                    self.cfg.topic,
                    exc,
                    exc_info=not isinstance(exc, TableTopicError),
                )
                self.status.record_error(f"{type(exc).__name__}: {exc}")
            finally:
                await self._stop_workers()
            await asyncio.sleep(backoff)

    # ------------------------------------------------------------------ one run
    async def _convert(
        self, partition: int, batches: list[tuple[bytes, BatchHeader]], start: int, next_offset: int
    ) -> ConvertedChunk:
        if self.deps.converter is not None:
            return await self.deps.converter.convert(
                partition, batches, start, next_offset, self.cfg
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.deps.executor,
            convert_batches,
            partition,
            batches,
            start,
            next_offset,
            self.cfg,
            self.deps.resolver,
        )

    async def _cycle(self) -> None:
        s = self.deps.settings
        writer = open_sink(
            self.deps.catalog,
            self.cfg,
            s.target_file_size_bytes,
            self._fault,
            str(self.topic.topic_id),
            self.topic.partition_count,
            self.deps.delta,
        )
        log.debug("table topic %s: loading committed offsets", self.cfg.topic)
        committed = await self._blocking(writer.offsets) or {}
        log.debug("table topic %s: committed offsets %s", self.cfg.topic, committed)
        await self._blocking(writer.ensure_table)  # the table shows before its first rows
        if await self._blocking(writer.apply_partition_spec):
            log.info("table topic %s: partition spec evolved", self.cfg.topic)
        dlq = DeadLetterWriter(
            self.deps.logs,
            self.cfg.topic,
            self.cfg.dlq_topic,
            # in a cluster, one DLQ partition per source partition: most brokers lead one
            partitions=self.topic.partition_count if self.deps.logs.lazy else 1,
        )
        await dlq.load()
        served = self.topic.partitions  # the partitions this broker serves now
        offsets: dict[int, int] = {}
        for plog in served:
            offsets[plog.partition] = max(committed.get(plog.partition, 0), plog.log_start_offset)
        # where a partition the table has no offsets for starts: derived the same way
        # on every start, so there is nothing to commit until it moves (no empty snapshot)
        start = dict(offsets)
        self.status.committed = {p: o for p, o in committed.items() if p in offsets} or {
            p: 0 for p in offsets
        }
        notify = asyncio.Event()
        queues: dict[int, asyncio.Queue[ConvertedChunk]] = {}
        workers: dict[int, PartitionWorker] = {}
        for plog in served:
            q: asyncio.Queue[ConvertedChunk] = asyncio.Queue(_QUEUE_CHUNKS)
            queues[plog.partition] = q
            w = PartitionWorker(
                plog,
                offsets[plog.partition],
                self._convert,
                q,
                notify,
                s.max_rows_per_chunk,
                s.max_bytes_per_chunk,
            )
            workers[plog.partition] = w
            self._workers.append(
                asyncio.create_task(w.run(), name=f"table-topic:{self.cfg.topic}-{plog.partition}")
            )
        if self.status.state != "error":
            self.status.state = "running"
        interval = self.cfg.commit_interval_ms / 1000
        last_commit = time.monotonic()
        pending: list[ConvertedChunk] = []
        draining = False  # a backlog of more than one commit is being converted
        while True:
            if self._stopping:
                raise asyncio.CancelledError()
            gone = {p for p, w in workers.items() if self.topic.logs.get(p) is not w.plog}
            moved = bool(gone) or len(self.topic.logs) != len(workers)  # leaders, resizes
            if moved:
                last_commit = time.monotonic()
                kept = [c for c in pending if c.partition not in gone]
                for q_p, q in queues.items():
                    while q_p not in gone and not q.empty():
                        kept.append(q.get_nowait())
                if any(c.records for c in kept):
                    for c in kept:
                        offsets[c.partition] = max(offsets[c.partition], c.next_offset)
                    staying = {p: o for p, o in offsets.items() if p not in gone}
                    await self._commit(writer, dlq, kept, staying)
                if gone:
                    log.info(
                        "table topic %s: partitions %s are no longer served here",
                        self.cfg.topic,
                        sorted(gone),
                    )
                return  # the next cycle starts from the table for the partitions served now
            for t in self._workers:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise TableTopicError(f"partition worker failed: {t.exception()!r}")
            notify.clear()
            pending_rows = sum(c.records for c in pending)
            for q in queues.values():
                while not q.empty() and pending_rows < s.max_rows_per_commit:
                    c = q.get_nowait()
                    pending.append(c)
                    pending_rows += c.records
            fatal = any(c.fatal for c in pending)
            due = time.monotonic() - last_commit >= interval
            full = pending_rows >= s.max_rows_per_commit
            # the rest of a backlog commits once it is converted, not an interval later
            caught_up = draining and _caught_up(workers, queues)
            if not (due or fatal or full or caught_up):
                remaining = interval - (time.monotonic() - last_commit)
                with suppress(asyncio.TimeoutError):
                    # wake at least every second to notice a leader move
                    await asyncio.wait_for(notify.wait(), min(max(remaining, 0.001), 1.0))
                continue
            last_commit = time.monotonic()
            if caught_up:
                draining = False
            elif full and not draining:
                draining = _lag(workers) >= s.max_rows_per_commit
            for c in pending:
                offsets[c.partition] = max(offsets[c.partition], c.next_offset)
            if any(c.records for c in pending) or any(
                offsets[p] != committed.get(p, start.get(p)) for p in offsets
            ):
                await self._commit(writer, dlq, pending, offsets)
                committed = dict(offsets)
                for p, w in workers.items():
                    self.status.offsets_skipped += w.skipped
                    w.skipped = 0
                    offsets[p] = max(offsets[p], committed.get(p, 0))
                fatal_msgs = [c.fatal for c in pending if c.fatal]
                pending = []
                if fatal_msgs:
                    raise TableTopicError(
                        f"errors.tolerance=none stops the table at {fatal_msgs[0]}"
                    )
            else:
                fatal_msgs = [c.fatal for c in pending if c.fatal]
                pending = []
                if fatal_msgs:
                    raise TableTopicError(
                        f"errors.tolerance=none stops the table at {fatal_msgs[0]}"
                    )
                await self._maybe_expire(writer)

    async def _commit(
        self,
        writer: TableSink,
        dlq: DeadLetterWriter,
        chunks: list[ConvertedChunk],
        offsets: dict[int, int],
    ) -> None:
        tables: list[pa.Table] = [t for c in chunks for t in c.tables]
        dead: list[DeadLetter] = [d for c in chunks for d in c.dead]
        schemas: list[pa.Schema] = []
        index: dict[str, int] = {}
        for t in tables:
            key = t.schema.to_string(show_field_metadata=False)
            if key not in index:
                index[key] = len(schemas)
                schemas.append(t.schema)
        verdicts = await self._blocking(writer.check_schemas, schemas) if schemas else []
        rejected = {i: v for i, v in enumerate(verdicts) if v is not None}
        if rejected:
            if self.cfg.errors_tolerance is ErrorsTolerance.NONE:
                raise TableTopicError(
                    f"incompatible schema change: {next(iter(rejected.values()))}"
                )
            keep = []
            for t in tables:
                i = index[t.schema.to_string(show_field_metadata=False)]
                if i in rejected:
                    dead += await self._dead_from_table(t, rejected[i])
                else:
                    keep.append(t)
            tables = keep
        if dead:
            if self.cfg.errors_tolerance is ErrorsTolerance.NONE:
                raise TableTopicError(f"invalid record at offset {dead[0].offset}: {dead[0].error}")
            written = await dlq.write(dead)
            self.status.dead_letters += written
        newest = max((c.max_timestamp for c in chunks), default=-1)
        self._commits_started += 1
        self._fault("before_commit")
        if self.deps.throttle is not None and tables:
            await self.deps.throttle(sum(t.nbytes for t in tables))
        commit_started = time.monotonic()
        result: CommitResult = await self._blocking(writer.commit, tables, dict(offsets))
        log.debug(
            "table topic %s: committed %d rows, offsets %s", self.cfg.topic, result.rows, offsets
        )
        self.status.record_commit(
            result.rows,
            result.files,
            result.deleted,
            newest,
            offsets,
            seconds=time.monotonic() - commit_started,
        )
        await self._maybe_expire(writer)

    async def _maybe_expire(self, writer: TableSink) -> None:
        if self.cfg.expire_snapshots:
            await self._blocking(writer.expire_snapshots)

    async def _dead_from_table(self, table: pa.Table, error: str) -> list[DeadLetter]:
        """Dead letters for rows whose schema the table cannot take: re-read the originals."""
        parts = table.column("_kafka_partition").to_pylist()
        offs = table.column("_kafka_offset").to_pylist()
        wanted: dict[int, set[int]] = {}
        for p, o in zip(parts, offs, strict=True):
            wanted.setdefault(p, set()).add(o)
        out: list[DeadLetter] = []
        for p, offsets in wanted.items():
            plog = self.topic.logs.get(p)
            if plog is None:  # it moved to another broker: this commit cannot happen here
                raise TableTopicError(f"partition {p} is no longer served here")
            for r in await _records_at(plog, offsets):
                out.append(
                    DeadLetter(
                        p,
                        r.offset,
                        r.timestamp,
                        r.key,
                        r.value,
                        r.headers,
                        error,
                        "SchemaEvolutionError",
                    )
                )
        return out


def _lag(workers: dict[int, PartitionWorker]) -> int:
    """Offsets of the served partitions not converted yet."""
    return sum(max(0, w.plog.last_stable_offset - w.position) for w in workers.values())


def _caught_up(
    workers: dict[int, PartitionWorker], queues: dict[int, asyncio.Queue[ConvertedChunk]]
) -> bool:
    """Every partition converted up to its last stable offset, every chunk taken."""
    return _lag(workers) == 0 and all(q.empty() for q in queues.values())


async def _records_at(plog: Any, offsets: set[int]) -> list[Record]:
    lo, hi = min(offsets), max(offsets)
    out: list[Record] = []
    async with aclosing(plog.scan(lo, committed_only=True)) as scan:
        async for view, h, _ in scan:
            if h.is_control or h.last_offset < lo:
                continue
            for r in decode_records(view, h):
                if r.offset in offsets:
                    out.append(r)
            if h.last_offset >= hi:
                break
    return out
