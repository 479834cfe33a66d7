"""The consumer groups of the consumer group protocol (KIP-848) that this
broker coordinates: heartbeats, descriptions, offset-commit checks and the
timer that removes members whose session or revocation time ran out.

Group state is in memory, as a classic group's is; committed offsets are in
the metadata store. A group id is either a classic group or a consumer group;
a consumer group may hold classic members too while an application migrates
(KIP-848): the classic coordinator routes their JoinGroup, SyncGroup,
Heartbeat and LeaveGroup here (``join_classic`` ...), converts a classic
group when a consumer member joins it (``upgrade``) and takes the group back
when the last consumer member leaves (``downgrade``), as
``migration_policy`` allows (see :mod:`ingest.group.migration`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ingest.group.consumer import classic
from ingest.group.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    Heartbeat,
    HeartbeatResult,
)
from ingest.group.types import (
    JoinGroupResult,
    LeaveMemberResult,
    MigrationPolicy,
    SyncGroupResult,
)
from ingest.protocol.errors import ErrorCode

__all__ = ["ConsumerGroupCoordinator", "ConsumerGroupConfig"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    empty_group_retention_ms: int = 600_000
    tick_s: float = 0.25
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL  # Kafka 4.0's default


class ConsumerGroupCoordinator:
    def __init__(
        self,
        topics: Callable[[], Mapping[str, int]],
        config: ConsumerGroupConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        classic_active: Callable[[str], bool] = lambda _group: False,
    ) -> None:
        self._topics = topics
        self.config = config or ConsumerGroupConfig()
        self._clock = clock
        self.classic_active = classic_active
        self.groups: dict[str, ConsumerGroup] = {}
        self._ticker: asyncio.Task[None] | None = None
        # set by the classic coordinator (GroupCoordinator.attach): the
        # classic group with this id as a consumer group, if it may become one
        self.upgrade: Callable[[str], ConsumerGroup | None] = lambda _group: None
        # ... and the group with only classic members left, to take back
        self.downgrade: Callable[[ConsumerGroup], None] = lambda _group: None

    async def start(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick_forever())

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        self.groups.clear()

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_s)
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the timer must go on
                log.exception("consumer group timer failed")

    def tick(self) -> None:
        now = self._clock()
        retention = self.config.empty_group_retention_ms / 1000
        for group_id, group in list(self.groups.items()):
            gone = group.tick(now)
            for member_id in gone:
                log.info("consumer group %s: member %s removed (timed out)", group_id, member_id)
            if gone:
                self._maybe_downgrade(group)
            if group.empty_since is not None and now - group.empty_since > retention:
                del self.groups[group_id]

    def active(self, group_id: str) -> bool:
        """A consumer group with members has this id."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def heartbeat(self, group_id: str, hb: Heartbeat) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(ErrorCode.invalid_group_id, message="group id must not be empty")
        group = self.groups.get(group_id)
        if group is None:
            if self.classic_active(group_id):
                converted = self.upgrade(group_id) if hb.member_epoch == 0 else None
                if converted is None:
                    return HeartbeatResult(
                        ErrorCode.group_id_not_found,
                        message=f"{group_id!r} is a classic group with members",
                    )
                log.info("group %s: converted from classic to consumer", group_id)
                group = self.groups[group_id] = converted
            elif hb.member_epoch != 0:
                return HeartbeatResult(ErrorCode.unknown_member_id, message="unknown member id")
            else:
                group = self.groups[group_id] = ConsumerGroup(
                    group_id, self.config.session_timeout_ms
                )
        result = group.heartbeat(hb, self._topics, self._clock())
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._maybe_downgrade(group)
        return result

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        if self.groups.get(group.group_id) is group and classic.can_downgrade(
            self.config.migration_policy, group
        ):
            del self.groups[group.group_id]
            log.info("group %s: converted from consumer to classic", group.group_id)
            self.downgrade(group)

    # --- classic members (online migration) ------------------------------------------
    def join_classic(
        self,
        group_id: str,
        *,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
    ) -> JoinGroupResult | None:
        """JoinGroup into a consumer group with members; None when there is
        none with that id (an empty one is dropped: the group turns classic)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if not group.members:
            del self.groups[group_id]
            return None
        return classic.join(
            group,
            member_id=member_id,
            instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id=client_id,
            client_host=client_host,
            require_known_member_id=require_known_member_id,
            topics=self._topics,
            now=self._clock(),
        )

    def sync_classic(
        self,
        group_id: str,
        *,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        return classic.sync(
            group,
            generation_id=generation_id,
            member_id=member_id,
            instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            now=self._clock(),
        )

    def heartbeat_classic(
        self, group_id: str, *, generation_id: int, member_id: str, instance_id: str | None
    ) -> int | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        return classic.heartbeat(
            group,
            generation_id=generation_id,
            member_id=member_id,
            instance_id=instance_id,
            topics=self._topics,
            now=self._clock(),
        )

    def leave_classic(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> list[LeaveMemberResult] | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        out = classic.leave(group, members, self._clock())
        self._maybe_downgrade(group)
        return out

    def validate_offsets(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int | None = None
    ) -> ErrorCode | None:
        """The answer to an OffsetCommit (``api_version``) or OffsetFetch
        naming a member of a consumer group, or None when ``group_id`` is no
        consumer group here. A classic member's generation is its epoch
        (ILLEGAL_GENERATION otherwise); a consumer member needs OffsetCommit
        v9+ (UNSUPPORTED_VERSION)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        member = group.members.get(member_id)
        if member is not None and member.classic is not None:
            if api_version is None:  # OffsetFetch
                return ErrorCode.none
            return classic.validate_generation(group, member, member_epoch, self._clock())
        if member is not None and api_version is not None and api_version < 9:
            return ErrorCode.unsupported_version
        return group.validate_offset_commit(member_id, member_epoch)
