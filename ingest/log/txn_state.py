"""Transaction state of one partition: ongoing transactions, the last stable
offset and the aborted-transaction index, as Kafka keeps them per partition.

A transactional batch of a producer that has no ongoing transaction here
starts one at the batch's base offset; a control batch (commit or abort
marker) ends it. The last stable offset (LSO) is the smallest first offset of
an ongoing transaction, or the high watermark when none is ongoing. An aborted
transaction is indexed as (producer id, first offset, marker offset) so that
Fetch can list the aborted transactions a read_committed consumer must drop.

The state is in memory; :meth:`TxnState.checkpoint` gives what must be kept
durably (:class:`~ingest.metadata.api.TxnCheckpoint`) so that a reopened
partition rebuilds it by scanning only from the checkpoint's stable offset.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Protocol

from ingest.metadata.api import AbortedTxn, TxnCheckpoint

__all__ = ["AbortedTxn", "TxnCheckpoint", "TxnCheckpointStore", "TxnState"]


class TxnCheckpointStore(Protocol):
    """Where partitions keep their transaction checkpoints (the metadata
    store implements it), keyed by the partition's stream id. Calls block:
    run them in a worker thread."""

    def get_txn_checkpoint(self, stream_id: int) -> TxnCheckpoint | None: ...

    def put_txn_checkpoint(self, stream_id: int, checkpoint: TxnCheckpoint) -> None: ...


@dataclass(slots=True)
class _Ended:
    """An ended transaction (committed or aborted) that may still straddle a
    checkpoint's stable offset: its marker is at or above the last stable
    offset (or not yet durable), so a checkpoint must start at or below its
    first offset."""

    producer_id: int
    first_offset: int
    marker_offset: int


_ENDED_KEPT = 256


@dataclass(slots=True)
class TxnState:
    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # by marker offset
    _marker_offsets: list[int] = field(default_factory=list)  # of ``aborted``, for bisect
    _longest: int = 0  # the largest marker - first offset of ``aborted``
    _ended: list[_Ended] = field(default_factory=list)
    _coordinator_epochs: dict[int, int] = field(default_factory=dict)

    # --- changes ----------------------------------------------------------------
    def on_transactional_batch(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch of ``producer_id`` was appended at ``base_offset``."""
        self.ongoing.setdefault(producer_id, base_offset)

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of the producer's last marker here (-1: none)."""
        return self._coordinator_epochs.get(producer_id, -1)

    def stale_coordinator(self, producer_id: int, coordinator_epoch: int) -> bool:
        """A marker from a coordinator older than the last one seen for the producer."""
        return coordinator_epoch < self._coordinator_epochs.get(producer_id, -1)

    def on_marker(
        self, producer_id: int, commit: bool, marker_offset: int, coordinator_epoch: int = -1
    ) -> AbortedTxn | None:
        """A marker of ``producer_id`` was appended at ``marker_offset``: end
        its ongoing transaction (indexing it when aborted). A marker for a
        producer with no ongoing transaction here ends and indexes nothing."""
        if coordinator_epoch >= 0:
            self._coordinator_epochs[producer_id] = coordinator_epoch
        first = self.ongoing.pop(producer_id, None)
        if first is None:
            return None
        self._ended.append(_Ended(producer_id, first, marker_offset))
        if commit:
            return None
        entry = AbortedTxn(producer_id, first, marker_offset)
        i = bisect.bisect_right(self._marker_offsets, marker_offset)  # the end, but in a replay
        self.aborted.insert(i, entry)
        self._marker_offsets.insert(i, marker_offset)
        self._longest = max(self._longest, marker_offset - first)
        return entry

    def trim(self, log_start_offset: int) -> bool:
        """Forget aborted transactions wholly below the log start; True if any."""
        i = bisect.bisect_left(self._marker_offsets, log_start_offset)
        if i:
            del self.aborted[:i]
            del self._marker_offsets[:i]
        return bool(i)

    # --- queries ----------------------------------------------------------------
    def last_stable_offset(self, high_watermark: int) -> int:
        if len(self._ended) > _ENDED_KEPT:  # without checkpoints: keep the list short
            self._stable_offset(high_watermark)
        return self._lso(high_watermark)

    def _lso(self, high_watermark: int) -> int:
        if not self.ongoing:
            return high_watermark
        return min(high_watermark, min(self.ongoing.values()))

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions whose [first, marker] range intersects [start, end)."""
        found: list[AbortedTxn] = []
        # by marker offset: skip those ending before start, stop where even the
        # longest transaction would begin at or after end
        i = bisect.bisect_left(self._marker_offsets, start)
        for a in itertools.islice(self.aborted, i, None):
            if a.last_offset - self._longest >= end:
                break
            if a.first_offset < end:
                found.append(a)
        return found

    # --- durability ----------------------------------------------------------------
    def checkpoint(self, high_watermark: int) -> TxnCheckpoint:
        """What to keep durably: every transaction starting below the
        returned stable offset also ended below it (its marker durable), and
        ``aborted`` lists those of them that aborted. A transaction ongoing,
        ended by a marker not yet durable, or ending at or after that offset
        starts at or above it, so a reopen that replays the log from there
        sees each such transaction from its first batch."""
        stable = self._stable_offset(high_watermark)
        kept = tuple(a for a in self.aborted if a.first_offset < stable)
        return TxnCheckpoint(stable, kept)

    def _stable_offset(self, high_watermark: int) -> int:
        """The start of the run of overlapping transactions that holds the
        LSO: the LSO, stepped below every ended transaction it falls inside
        (by marker offset, descending, one pass is enough). It never moves
        back, so transactions that ended below it are forgotten."""
        stable = self._lso(high_watermark)
        for e in reversed(self._ended):
            if e.first_offset < stable <= e.marker_offset:
                stable = e.first_offset
        if self._ended and self._ended[0].marker_offset < stable:
            self._ended = [e for e in self._ended if e.marker_offset >= stable]
        return stable

    @classmethod
    def restore(cls, checkpoint: TxnCheckpoint | None) -> TxnState:
        """The state a checkpoint describes (before replaying the log from its
        stable offset with :meth:`on_transactional_batch` and :meth:`on_marker`)."""
        state = cls()
        if checkpoint is not None:
            state.aborted = sorted(checkpoint.aborted, key=_marker_offset)
            state._marker_offsets = [a.last_offset for a in state.aborted]
            state._longest = max((a.last_offset - a.first_offset for a in state.aborted), default=0)
        return state


def _marker_offset(a: AbortedTxn) -> int:
    return a.last_offset
