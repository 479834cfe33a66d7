"""Idempotent producer state of one partition.

For each producer id the partition remembers the epoch and the last five
batches it appended (first and last sequence, offsets, and the append's
completion), as Kafka does. A retried batch that matches one of them is a
duplicate: it is answered with its original offsets once the original append is
durable. A batch whose first sequence is not the next one is out of order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from ingest.protocol.errors import ErrorCode

__all__ = ["ProducerStateTable", "SequenceCheck"]

_KEEP = 5


@dataclass(slots=True)
class _BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    done: asyncio.Future[int] | None


@dataclass(slots=True)
class _Producer:
    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=_KEEP))


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    error: ErrorCode = ErrorCode.none
    duplicate_of: _BatchMeta | None = None


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> SequenceCheck:
        if producer_id < 0:
            return SequenceCheck()
        p = self._producers.get(producer_id)
        if p is None:
            # Unknown producer (new, or its state was lost with retention):
            # accept, as Kafka does since KIP-360.
            return SequenceCheck()
        if epoch < p.epoch:
            return SequenceCheck(ErrorCode.invalid_producer_epoch)
        if epoch > p.epoch:
            if first_seq != 0:
                return SequenceCheck(ErrorCode.out_of_order_sequence_number)
            return SequenceCheck()
        for b in p.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return SequenceCheck(duplicate_of=b)
        if not p.batches:
            return SequenceCheck()
        last = p.batches[-1].last_seq
        if first_seq != (last + 1) & 0x7FFFFFFF:
            return SequenceCheck(ErrorCode.out_of_order_sequence_number)
        return SequenceCheck()

    def record(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        base_offset: int,
        done: asyncio.Future[int] | None,
    ) -> None:
        if producer_id < 0:
            return
        p = self._producers.get(producer_id)
        if p is None or epoch > p.epoch:
            p = _Producer(epoch)
            self._producers[producer_id] = p
        p.batches.append(_BatchMeta(first_seq, last_seq, base_offset, done))

    def epoch_of(self, producer_id: int) -> int | None:
        """The producer's known epoch here (None when it is unknown)."""
        p = self._producers.get(producer_id)
        return None if p is None else p.epoch

    def raise_epoch(self, producer_id: int, epoch: int) -> None:
        """A transaction marker of ``epoch`` was written: a higher epoch than
        the known one becomes the producer's (its sequences start over), so
        the older epoch is fenced from then on."""
        p = self._producers.get(producer_id)
        if p is None or epoch > p.epoch:
            self._producers[producer_id] = _Producer(epoch)

    def snapshot(self) -> list[tuple[int, int, int]]:
        """(producer id, epoch, last sequence or -1) of every producer known
        here, for DescribeProducers."""
        return [
            (pid, p.epoch, p.batches[-1].last_seq if p.batches else -1)
            for pid, p in sorted(self._producers.items())
        ]

    def __len__(self) -> int:
        return len(self._producers)
