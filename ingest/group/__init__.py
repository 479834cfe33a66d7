"""Classic-protocol consumer group coordinator (no networking, no wire codec)."""

from ingest.group.coordinator import GroupCoordinator, OffsetStore
from ingest.group.types import (
    FetchOffsetsResult,
    GroupConfig,
    GroupDescription,
    GroupState,
    JoinGroupResult,
    JoinMember,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    MemberDescription,
    OffsetFetchPartition,
    SyncGroupResult,
)

__all__ = [
    "GroupCoordinator",
    "GroupConfig",
    "GroupState",
    "OffsetStore",
    "JoinGroupResult",
    "JoinMember",
    "SyncGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "FetchOffsetsResult",
    "OffsetFetchPartition",
    "GroupDescription",
    "MemberDescription",
    "ListedGroup",
]
