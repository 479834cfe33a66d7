"""The transform one cleaning pass hands to ``Stream.rewrite``.

For each Kafka record batch of the cleaned part, in offset order:

- a record is kept when it is the latest of its key (the key's offset in the
  dirty part's map, or a key the dirty part does not have); records without
  a key and records of aborted transactions are dropped;
- a tombstone (null value) that is the latest of its key is kept until
  delete.retention.ms after the pass that first saw it, then dropped;
- a transaction marker (control batch) is dropped once no data of its
  transaction remains before it and delete.retention.ms has passed since
  the cleaner first saw it (Kafka's rule); otherwise kept as it is;
- a batch left without records is dropped, unless it is its producer's last
  data batch (kept as an empty batch: the producer's sequence state).

Offsets never move: a stream batch keeps its offsets, and the offsets of a
dropped one join the next kept batch of the run, so a fetch at a
compacted-away offset returns the next record batch. If a run ends with
dropped batches, its last Kafka batch is kept empty to hold the run's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ingest.log.compaction.batches import RawRecord, rebuild_batch
from ingest.log.compaction.state import CleanerState
from ingest.protocol.records import BatchHeader, split_batches
from ingest.s3stream.api import StreamBatch

__all__ = ["CleaningFilter"]


@dataclass
class CleaningFilter:
    latest: dict[bytes, int]
    """Key -> offset of its latest record in the dirty part."""
    dirty_start: int
    state: CleanerState
    now_ms: int
    delete_retention_ms: int
    aborted: dict[int, list[tuple[int, int]]]
    """Producer id -> (first offset, marker offset) of its aborted transactions."""
    last_batches: dict[int, int]
    """Producer id -> base offset of its last data batch in the cleaned range."""
    records_dropped: int = 0
    tombstones_dropped: int = 0
    markers_dropped: int = 0
    kept_markers_in_dirty: bool = False
    _txn_data: dict[int, bool] = field(default_factory=dict)
    _changed: bool = False  # the batch just cleaned lost something
    index: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(first record batch's base offset, end, bytes, max timestamp) of every
    stream batch handed back, in order: the partition's new batch index."""

    def __call__(self, run: list[StreamBatch]) -> list[StreamBatch]:
        out = self._clean_run(run)
        for sb in out:
            view = memoryview(sb.payload)
            headers = split_batches(view, verify_crc=False)
            self.index.append(
                (
                    headers[0].base_offset,
                    sb.end_offset,
                    len(sb.payload),
                    max(h.max_timestamp for h in headers),
                )
            )
        return out

    def _clean_run(self, run: list[StreamBatch]) -> list[StreamBatch]:
        out: list[StreamBatch] = []
        gap: int | None = None  # base offset of the first dropped stream batch of a gap
        last_dropped: tuple[memoryview, BatchHeader] | None = None
        for sb in run:
            view = memoryview(sb.payload)
            parts: list[bytes] = []
            changed = False
            for h in split_batches(view, verify_crc=False):
                self._changed = False
                part = self._clean(view, h)
                changed = changed or self._changed or part is None
                if part is not None:
                    parts.append(part)
                last_dropped = (view, h)
            if not changed and gap is None:
                out.append(sb)  # as it was: the engine keeps objects that do not change
            elif parts:
                base = sb.base_offset if gap is None else gap
                out.append(StreamBatch(sb.stream_id, base, sb.end_offset - base, b"".join(parts)))
                gap = None
            elif gap is None:
                gap = sb.base_offset
        if gap is not None and last_dropped is not None:
            view, h = last_dropped
            if h.is_control:
                payload = bytes(view[h.position : h.position + h.size])
            else:
                payload = rebuild_batch(view, h, lambda _r: False)[0]
            end = run[-1].end_offset
            out.append(StreamBatch(run[-1].stream_id, gap, end - gap, payload))
        return out

    def _expired(self, offset: int) -> bool:
        if offset >= self.dirty_start:
            return False  # first seen by this pass
        return self.state.expired(offset, self.now_ms, self.delete_retention_ms)

    def _is_aborted(self, h: BatchHeader) -> bool:
        ranges = self.aborted.get(h.producer_id)
        return ranges is not None and any(lo <= h.base_offset <= hi for lo, hi in ranges)

    def _clean(self, view: memoryview, h: BatchHeader) -> bytes | None:
        """The batch as it stays, or None when it goes."""
        pid = h.producer_id
        if h.is_control:
            had_data = self._txn_data.pop(pid, False)
            if not had_data and self._expired(h.base_offset):
                self.markers_dropped += 1
                return None
            if h.base_offset >= self.dirty_start:
                self.kept_markers_in_dirty = True
            return bytes(view[h.position : h.position + h.size])
        aborted = h.is_transactional and self._is_aborted(h)
        base = h.base_offset
        latest = self.latest
        tombstones: list[int] = [0]

        def keep(r: RawRecord) -> bool:
            if aborted or r.key is None:
                return False
            off = base + r.offset_delta
            newest = latest.get(r.key)
            if newest is not None and off < newest:
                return False
            if r.tombstone:
                if self._expired(off):
                    tombstones[0] += 1
                    return False
                if off >= self.dirty_start:
                    self.kept_markers_in_dirty = True
            return True

        data, kept, dropped = rebuild_batch(view, h, keep)
        self.records_dropped += dropped
        self._changed = dropped > 0
        self.tombstones_dropped += tombstones[0]
        if kept and h.is_transactional:
            self._txn_data[pid] = True
        if kept or (pid >= 0 and self.last_batches.get(pid) == base):
            return data
        return None
