"""The log cleaner: compaction of ``cleanup.policy=compact`` partitions.

A background task visits the compacted partitions this broker serves, one
at a time, every ``interval_ms``. A partition is cleaned when

- its dirty part (bytes after the cleaner's last pass, over all bytes) has
  reached ``min.cleanable.dirty.ratio``, or
- its oldest dirty batch is older than ``max.compaction.lag.ms``, or
- a tombstone or transaction marker it keeps has passed
  ``delete.retention.ms``.

The cleanable part ends at the first of: the end of the data in object
storage (the tail in the WAL and log cache is never rewritten: the
producer's own writes read back as written), the last stable offset (open
transactions), and the first batch younger than ``min.compaction.lag.ms``.

A pass maps each key of the dirty part to its latest offset (at most
``max_map_bytes`` of keys: a larger dirty part is cleaned in several
passes), then rewrites everything from the log start to the cleanable end
through ``Stream.rewrite`` with a :class:`CleaningFilter`. Offsets never
change. Reads and writes of the rewrite pass the engine's network limiter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ingest.log.compaction.batches import iter_raw_records
from ingest.log.compaction.filter import CleaningFilter
from ingest.log.compaction.state import CheckpointStore, CleanerState, state_key
from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfig

__all__ = ["LogCleaner", "CleanResult"]

log = logging.getLogger(__name__)

_KEY_OVERHEAD = 64  # bytes a map entry costs beyond its key


@dataclass(frozen=True, slots=True)
class CleanResult:
    topic: str
    partition: int
    clean_end: int
    bytes_before: int
    bytes_after: int
    records_dropped: int
    tombstones_dropped: int
    markers_dropped: int
    seconds: float


class LogCleaner:
    """Cleans compacted partitions; ``partitions()`` lists (log, config) of
    the partitions this broker serves."""

    def __init__(
        self,
        partitions: Callable[[], Iterable[tuple[PartitionLog, TopicConfig]]],
        store: CheckpointStore,
        *,
        interval_ms: int = 15_000,
        max_map_bytes: int = 128 * 1024 * 1024,
        max_bytes_per_second: int = 0,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._partitions = partitions
        self._store = store
        self._interval_s = interval_ms / 1000
        self._max_map_bytes = max_map_bytes
        self._clock_ms = clock_ms
        self._rate = (
            max_bytes_per_second  # 0: unbounded (Kafka's log.cleaner.io.max.bytes.per.second)
        )
        self._debt_until = 0.0  # monotonic time before which the cleaner owes rest
        self.passes = 0
        self.bytes_cleaned = 0  # bytes handed to rewrites (read by metrics and the bench)

    async def run(self) -> None:
        """Clean forever, one partition at a time, every ``interval_ms``."""
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next round tries again
                log.exception("log cleaner round failed")

    async def run_once(self, *, force: bool = False) -> list[CleanResult]:
        """Visit every compacted partition once; returns the passes made."""
        done: list[CleanResult] = []
        for plog, cfg in list(self._partitions()):
            if not cfg.compact:
                continue
            try:
                result = await self.clean(plog, cfg, force=force)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one partition must not stop the others
                log.exception("cleaning %s-%d failed", plog.topic, plog.partition)
                continue
            if result is not None:
                done.append(result)
        return done

    async def _throttle(self, nbytes: int) -> None:
        """Keep the cleaner's reads and writes at ``max_bytes_per_second``."""
        if self._rate <= 0 or nbytes <= 0:
            return
        now = time.monotonic()
        self._debt_until = max(self._debt_until, now) + nbytes / self._rate
        if self._debt_until - now > 0.05:
            await asyncio.sleep(self._debt_until - now)

    async def _state(self, stream_id: int) -> CleanerState:
        """Read at every pass: a partition that moved away and back finds what
        the other broker's cleaner did meanwhile."""
        text = await asyncio.to_thread(self._store.get_kv, state_key(stream_id))
        return CleanerState.from_json(text)

    async def clean(
        self, plog: PartitionLog, cfg: TopicConfig, *, force: bool = False
    ) -> CleanResult | None:
        """One pass over ``plog`` if it is due (or ``force``); None if not."""
        started = time.perf_counter()
        now = self._clock_ms()
        stream = plog.stream
        state = await self._state(stream.stream_id)
        log_start = plog.log_start_offset
        entries = await plog.batch_index()
        if not entries:
            return None
        dirty_start = max(state.clean_offset, log_start)
        limit = min(stream.committed_end, plog.last_stable_offset, plog.high_watermark)
        min_lag = cfg.get_int("min.compaction.lag.ms")
        clean_end = dirty_start
        for _base, end, _size, max_ts in entries:
            if end > limit or (end > dirty_start and min_lag > 0 and max_ts > now - min_lag):
                break
            clean_end = max(clean_end, end)
        retention = cfg.get_int("delete.retention.ms")
        dirty = [(z, t) for _b, e, z, t in entries if dirty_start < e <= clean_end]
        dirty_bytes = sum(z for z, _ in dirty)
        total = sum(z for _b, e, z, _t in entries if e <= clean_end)
        expiring = state.expiring(now, retention)
        if not force and not expiring:
            if not dirty_bytes:
                return None
            ratio_due = dirty_bytes >= total * cfg.get_float("min.cleanable.dirty.ratio")
            oldest = min(t for _, t in dirty)
            lag_due = now - oldest >= cfg.get_int("max.compaction.lag.ms")
            if not ratio_due and not lag_due:
                return None
        if clean_end <= 0:
            return None
        latest, producers, clean_end = await self._map(plog, dirty_start, clean_end)
        aborted: dict[int, list[tuple[int, int]]] = {}
        for a in plog.txn.aborted_between(0, clean_end):
            aborted.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        last_batches = dict(state.producers)
        last_batches.update(producers)
        flt = CleaningFilter(latest, dirty_start, state, now, retention, aborted, last_batches)
        stats = await stream.rewrite(0, clean_end, flt)
        plog.rewritten(clean_end, flt.index)
        await self._throttle(stats.bytes_in + stats.bytes_out)
        state.after_pass(
            dirty_start,
            clean_end,
            now,
            retention,
            flt.kept_markers_in_dirty,
            last_batches,
            log_start,
        )
        try:
            await asyncio.to_thread(
                self._store.put_kv, state_key(stream.stream_id), state.to_json()
            )
        except Exception:  # noqa: BLE001 - the next pass redoes this one
            log.warning("saving the cleaner state of %s-%d failed", plog.topic, plog.partition)
        self.passes += 1
        self.bytes_cleaned += stats.bytes_in
        result = CleanResult(
            plog.topic,
            plog.partition,
            clean_end,
            stats.bytes_in,
            stats.bytes_out,
            flt.records_dropped,
            flt.tombstones_dropped,
            flt.markers_dropped,
            time.perf_counter() - started,
        )
        log.info(
            "cleaned %s-%d below %d: %d -> %d bytes, %d records dropped (%d tombstones)",
            plog.topic,
            plog.partition,
            clean_end,
            stats.bytes_in,
            stats.bytes_out,
            flt.records_dropped,
            flt.tombstones_dropped,
        )
        return result

    async def _map(
        self, plog: PartitionLog, start: int, end: int
    ) -> tuple[dict[bytes, int], dict[int, int], int]:
        """Key -> latest offset over ``[start, end)`` (committed data: no
        aborted transactions, no markers), the base offset of each
        producer's last data batch there, and where the map stops (``end``,
        or earlier at a stream batch boundary when ``max_map_bytes`` is
        reached)."""
        latest: dict[bytes, int] = {}
        producers: dict[int, int] = {}
        size = 0
        stop = end
        current = -1  # end of the stream batch being read
        async for view, h, sb_end in plog.scan(start):
            if sb_end > end:
                break
            if sb_end != current:
                if current != -1 and size > self._max_map_bytes:
                    stop = current
                    break
                current = sb_end
            await self._throttle(h.size)
            if h.is_control:
                continue
            if h.producer_id >= 0:
                producers[h.producer_id] = h.base_offset
            if h.is_transactional and _aborted(plog, h.producer_id, h.base_offset):
                continue
            base = h.base_offset
            for r in iter_raw_records(view, h)[1]:
                if r.key is not None:
                    if r.key not in latest:
                        size += len(r.key) + _KEY_OVERHEAD
                    latest[r.key] = base + r.offset_delta
        return latest, producers, stop


def _aborted(plog: PartitionLog, producer_id: int, offset: int) -> bool:
    return any(
        a.producer_id == producer_id and a.first_offset <= offset <= a.last_offset
        for a in plog.txn.aborted_between(offset, offset + 1)
    )
