"""What the cluster-wide reads return, and the one interface each broker's
reads implement (locally for this broker, over the Kafka protocol for the
others). Plain frozen dataclasses: the console's pydantic models and the lag
gauges are built from them."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Assignment",
    "BrokerReads",
    "GroupInfo",
    "ListedGroup",
    "MemberInfo",
    "PartitionEnds",
    "TopicPartition",
    "decode_assignment",
]

TopicPartition = tuple[str, int]
Assignment = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions) by topic


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group as a broker's ListGroups lists it."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str  # "classic" or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class MemberInfo:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group as its coordinator describes it; ``state`` "Dead" for a group
    it does not know."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the classic group's protocol, or the KIP-848 group's assignor
    group_type: str = "classic"
    members: tuple[MemberInfo, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class PartitionEnds:
    """A partition's log start offset and high watermark as its leader
    answered; None where the leader did not (or is moving)."""

    log_start_offset: int | None
    high_watermark: int | None


class BrokerReads(Protocol):
    """The reads one broker answers for the console and the lag gauges.

    Every method may raise when the broker does not answer (connection
    refused, timeout, a response that does not decode); the caller shows that
    broker as unreachable."""

    async def list_groups(self) -> list[ListedGroup]:
        """ListGroups: the groups this broker knows (classic and KIP-848)."""

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        """Each group as this broker (its coordinator) describes it."""

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        """High watermarks (and log start offsets when ``earliest``) of
        partitions this broker leads; a partition it does not lead maps to
        ends of None."""

    async def partition_sizes(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Retained bytes of the partitions of ``partitions`` this broker
        leads (DescribeLogDirs); the others are left out."""


def decode_assignment(data: bytes) -> Assignment:
    """Kafka's ConsumerProtocolAssignment (version, [topic, [partition]],
    user data) as (topic, sorted partitions); what does not parse is left out."""
    out: list[tuple[str, tuple[int, ...]]] = []
    if len(data) < 6:
        return ()
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(0, n)):
            (tlen,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos : pos + tlen].decode()
            pos += tlen
            (pn,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(0, pn)}i", data, pos)
            pos += 4 * max(0, pn)
            out.append((topic, tuple(sorted(parts))))
    except (struct.error, UnicodeDecodeError):
        return tuple(out)
    return tuple(out)
