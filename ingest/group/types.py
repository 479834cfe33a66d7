"""Configuration and result types of the group coordinator.

Results are frozen, slotted dataclasses (or named tuples where the brief asks
for tuples) holding plain values; error codes are ``int`` (``ErrorCode`` is an
``IntEnum``, so ``ErrorCode.none`` compares equal to ``0``). The Kafka request
handlers turn them into wire responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "GroupConfig",
    "GroupState",
    "MigrationPolicy",
    "JoinMember",
    "JoinGroupResult",
    "SyncGroupResult",
    "LeaveMemberResult",
    "LeaveGroupResult",
    "OffsetFetchPartition",
    "FetchOffsetsResult",
    "MemberDescription",
    "GroupDescription",
    "ListedGroup",
]


class GroupConfig(BaseModel):
    """Settings of the group coordinator (Kafka's ``group.*`` broker configs).

    The field names match :class:`ingest.config.BrokerConfig`, which carries the
    first three; build one with ``GroupConfig(**{k: getattr(broker, k) ...})``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    group_min_session_timeout_ms: int = Field(default=6_000, ge=1)
    group_max_session_timeout_ms: int = Field(default=1_800_000, ge=1)
    group_initial_rebalance_delay_ms: int = Field(default=3_000, ge=0)
    max_metadata_bytes: int = Field(default=4_096, ge=0)  # offset commit metadata (characters)
    group_max_size: int | None = Field(default=None, ge=1)  # None: unbounded
    # How long a group without members stays in memory (its offsets stay in the
    # store regardless); Kafka drops such groups at its next offsets cleanup.
    empty_group_retention_ms: int = Field(default=600_000, ge=0)

    @model_validator(mode="after")
    def _session_bounds(self) -> GroupConfig:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError(
                "group_min_session_timeout_ms must not exceed group_max_session_timeout_ms"
            )
        return self


class MigrationPolicy(StrEnum):
    """Kafka's values of ``group.consumer.migration.policy``."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """JoinGroup outcome.

    ``members`` is non-empty only for the leader. ``skip_assignment`` is set
    when a static leader rejoined a Stable group (KIP-814): it must not run the
    assignor; handlers for JoinGroup < v9 should send it an empty member list.
    ``protocol_type``/``protocol_name`` are ``None`` when unknown (errors).
    """

    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False

    @classmethod
    def failed(cls, error: ErrorCode, member_id: str = "") -> JoinGroupResult:
        return cls(int(error), -1, None, None, "", member_id)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes

    @classmethod
    def failed(cls, error: ErrorCode) -> SyncGroupResult:
        return cls(int(error), None, None, b"")


class LeaveMemberResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """Top-level ``error_code`` plus one entry per member asked to leave.

    For LeaveGroup v0-v2 (one member, no per-member errors) the handler should
    send the single member's error as the top-level error.
    """

    error_code: int
    members: list[LeaveMemberResult] = field(default_factory=list)


class OffsetFetchPartition(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class FetchOffsetsResult:
    error_code: int
    partitions: list[OffsetFetchPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # for the selected protocol; empty unless the group is Stable
    assignment: bytes  # empty unless the group is Stable


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # empty unless the group is Stable
    members: list[MemberDescription] = field(default_factory=list)


class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
