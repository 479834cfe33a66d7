"""A transactional id's durable record and the states Kafka gives it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "TxnState",
    "TxnRecord",
    "PendingOffset",
    "Offsets",
    "offsets_to_json",
    "offsets_from_json",
]


class TxnState(Enum):
    """Kafka's transaction states, named as DescribeTransactions and
    ListTransactions show them."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction is open: a new one may begin."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """An offset committed inside a transaction (TxnOffsetCommit): it becomes
    the group's committed offset only when the transaction commits."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(slots=True)
class TxnRecord:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    # the epoch before the last bump: an InitProducerId retried with it gets
    # the current epoch back instead of a second bump (KIP-360)
    last_producer_epoch: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    # the groups whose offsets the transaction commits (AddOffsetsToTxn); the
    # offsets themselves are stored apart (TxnStore.put_offsets), by the
    # broker coordinating the group, which in a cluster may be another one
    groups: set[str] = field(default_factory=set)
    start_ms: int = -1  # when the open transaction began (-1: none)
    update_ms: int = -1

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.transactional_id,
                "pid": self.producer_id,
                "epoch": self.producer_epoch,
                "last_epoch": self.last_producer_epoch,
                "timeout_ms": self.timeout_ms,
                "state": self.state.value,
                "partitions": sorted([t, p] for t, p in self.partitions),
                "groups": sorted(self.groups),
                "start_ms": self.start_ms,
                "update_ms": self.update_ms,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> TxnRecord:
        d = json.loads(text)
        return cls(
            transactional_id=str(d["id"]),
            producer_id=int(d["pid"]),
            producer_epoch=int(d["epoch"]),
            timeout_ms=int(d["timeout_ms"]),
            state=TxnState(d["state"]),
            last_producer_epoch=int(d["last_epoch"]),
            partitions={(str(t), int(p)) for t, p in d["partitions"]},
            groups={str(g) for g in d["groups"]},
            start_ms=int(d["start_ms"]),
            update_ms=int(d["update_ms"]),
        )

    def copy(self) -> TxnRecord:
        return TxnRecord.from_json(self.to_json())


Offsets = dict[tuple[str, int], PendingOffset]


def offsets_to_json(transactional_id: str, group: str, offsets: Offsets) -> str:
    return json.dumps(
        {
            "id": transactional_id,
            "group": group,
            "offsets": [
                [o.topic, o.partition, o.offset, o.leader_epoch, o.metadata]
                for o in sorted(offsets.values(), key=lambda o: (o.topic, o.partition))
            ],
        },
        separators=(",", ":"),
    )


def offsets_from_json(text: str) -> tuple[str, str, Offsets]:
    d = json.loads(text)
    offsets = {
        (str(t), int(p)): PendingOffset(str(t), int(p), int(o), int(e), m)
        for t, p, o, e, m in d["offsets"]
    }
    return str(d["id"]), str(d["group"]), offsets
