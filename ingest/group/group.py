"""The state machine of one classic-protocol consumer group.

Everything here is synchronous and does no I/O: the coordinator calls these
methods on the event loop, so each call is atomic with respect to the others.
Calls that must wait for other members (JoinGroup during a rebalance, SyncGroup
before the leader's assignment) return a future that a later call, or a timer
(:meth:`Group.tick`), resolves.

States follow Apache Kafka's classic group coordinator::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader sync--> Stable --join/leave/expiry--> PreparingRebalance
    any --delete--> Dead

Times are in seconds of the coordinator's clock; timeouts given in ms.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import Counter
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ingest.group.types import (
    GroupConfig,
    GroupState,
    JoinGroupResult,
    JoinMember,
    LeaveMemberResult,
    MemberDescription,
    SyncGroupResult,
)

__all__ = ["Group", "Member"]

_NONE = int(ErrorCode.none)
_RETRY_S = 0.05


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    session_deadline: float
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinGroupResult] | None = None
    sync_waiter: asyncio.Future[SyncGroupResult] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


def _resolve(
    fut: asyncio.Future[JoinGroupResult] | asyncio.Future[SyncGroupResult] | None,
    result: JoinGroupResult | SyncGroupResult,
) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)  # type: ignore[arg-type]


class Group:
    """One consumer group: members, generation, and the rebalance deadlines."""

    def __init__(self, group_id: str, config: GroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # in join order
        self.pending_members: dict[str, float] = {}  # member id -> deadline (MEMBER_ID_REQUIRED)
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_sync: set[str] = set()
        self._protocol_counts: Counter[str] = Counter()  # protocol -> members supporting it
        # Rebalance timers.
        self.join_deadline: float | None = None
        self.initial_delay_phase = False
        self.initial_delay_remaining_ms = 0
        self.new_member_added = False
        self.sync_deadline: float | None = None
        self.forget_deadline: float | None = None  # while Empty without members
        # Earliest deadline the coordinator's timer knows about for this group;
        # ``wake_dirty`` asks it to schedule ``wake_at``.
        self.wake_at = math.inf
        self.wake_dirty = False
        self.lock = asyncio.Lock()  # serialises offset store I/O for the group
        # members that came from a consumer group (KIP-848 downgrade) -> the
        # epoch they had there: their generation until the first rebalance ends
        self.legacy_generations: dict[str, int] = {}

    # --- small helpers ---------------------------------------------------------
    def _note_deadline(self, deadline: float) -> None:
        if deadline < self.wake_at:
            self.wake_at = deadline
            self.wake_dirty = True

    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def has_members(self) -> bool:
        return bool(self.members)

    def _generation_ok(self, member_id: str, generation_id: int) -> bool:
        return (
            generation_id == self.generation_id
            or self.legacy_generations.get(member_id) == generation_id
        )

    def adopt(self, members: list[tuple[Member, int]], generation_id: int, now: float) -> None:
        """Take the members of a consumer group that turns classic (KIP-848
        downgrade), each with its epoch there; their assignments stand until
        the rebalance started here gives them the leader's."""
        self.generation_id = generation_id
        for member, epoch in members:
            self.members[member.member_id] = member
            self._count_protocols(member, +1)
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
            self.legacy_generations[member.member_id] = epoch
            self._note_deadline(member.session_deadline)
        self.protocol_type = members[0][0].protocol_type if members else None
        self.leader_id = next(iter(self.members), None)
        self.protocol_name = None
        self.state = GroupState.STABLE
        self._prepare_rebalance(now)

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _supports_protocols(
        self, protocol_type: str, protocols: list[tuple[str, bytes]], member_id: str | None
    ) -> bool:
        if not protocol_type or not protocols:
            return False
        excluded = self.members.get(member_id) if member_id is not None else None
        others = len(self.members) - (excluded is not None)
        if not others:
            return True  # the joining member alone decides the protocol type
        if protocol_type != self.protocol_type:
            return False
        own = set(excluded.protocol_names()) if excluded is not None else set()
        counts = self._protocol_counts
        return any(counts[name] - (name in own) == others for name, _ in protocols)

    def _count_protocols(self, member: Member, delta: int) -> None:
        for name in set(member.protocol_names()):
            self._protocol_counts[name] += delta
            if not self._protocol_counts[name]:
                del self._protocol_counts[name]

    def _select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = set(members[0].protocol_names())
        for m in members[1:]:
            candidates &= set(m.protocol_names())
        votes: Counter[str] = Counter()
        for m in members:
            for name in m.protocol_names():
                if name in candidates:
                    votes[name] += 1
                    break
        order = [n for n in members[0].protocol_names() if n in candidates]
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def _join_result(self, member: Member, *, skip_assignment: bool = False) -> JoinGroupResult:
        is_leader = member.member_id == self.leader_id
        members = (
            [
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            ]
            if is_leader
            else []
        )
        return JoinGroupResult(
            _NONE,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            member.member_id,
            members,
            skip_assignment,
        )

    # --- membership changes ------------------------------------------------------
    def _add_member(self, member: Member, now: float) -> asyncio.Future[JoinGroupResult]:
        fut: asyncio.Future[JoinGroupResult] = self._loop().create_future()
        member.join_waiter = fut
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.new_member_added = True
        self._note_deadline(member.session_deadline)
        self._maybe_prepare_rebalance(now)
        self._try_complete_join(now)
        return fut

    def _update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: float,
    ) -> asyncio.Future[JoinGroupResult]:
        self._count_protocols(member, -1)
        member.protocols = list(protocols)
        self._count_protocols(member, +1)
        if len(self.members) == 1:
            self.protocol_type = member.protocol_type
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        # A member that sends a second JoinGroup abandons the first one.
        _resolve(
            member.join_waiter,
            JoinGroupResult.failed(ErrorCode.rebalance_in_progress, member.member_id),
        )
        fut: asyncio.Future[JoinGroupResult] = self._loop().create_future()
        member.join_waiter = fut
        self._maybe_prepare_rebalance(now)
        self._try_complete_join(now)
        return fut

    def _remove_member(self, member: Member) -> None:
        """Drop a member without touching the group state."""
        del self.members[member.member_id]
        self._count_protocols(member, -1)
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member.member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member.member_id)
        _resolve(
            member.join_waiter,
            JoinGroupResult.failed(ErrorCode.unknown_member_id, member.member_id),
        )
        _resolve(member.sync_waiter, SyncGroupResult.failed(ErrorCode.unknown_member_id))
        member.join_waiter = member.sync_waiter = None
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_member_and_update(self, member: Member, now: float) -> None:
        self._remove_member(member)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        self._try_complete_join(now)

    # --- rebalance -----------------------------------------------------------------
    def _maybe_prepare_rebalance(self, now: float) -> None:
        if self.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)

    def _prepare_rebalance(self, now: float) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            # The leader's assignment of this generation will never be used.
            for m in self.members.values():
                m.assignment = b""
                _resolve(m.sync_waiter, SyncGroupResult.failed(ErrorCode.rebalance_in_progress))
                m.sync_waiter = None
        self.pending_sync.clear()
        self.sync_deadline = None
        rebalance_timeout_ms = self._rebalance_timeout_ms()
        initial_delay_ms = self.config.group_initial_rebalance_delay_ms
        if self.state is GroupState.EMPTY and initial_delay_ms > 0:
            delay_ms = min(initial_delay_ms, rebalance_timeout_ms)
            self.initial_delay_phase = True
            self.initial_delay_remaining_ms = max(rebalance_timeout_ms - initial_delay_ms, 0)
            self.new_member_added = False
            self.join_deadline = now + delay_ms / 1000
        else:
            self.initial_delay_phase = False
            self.join_deadline = now + rebalance_timeout_ms / 1000
        self.state = GroupState.PREPARING_REBALANCE
        self._note_deadline(self.join_deadline)

    def _all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.join_waiter is not None for m in self.members.values()
        )

    def _try_complete_join(self, now: float) -> None:
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and not self.initial_delay_phase
            and self._all_members_joined()
        ):
            self._complete_join(now)

    def _complete_join(self, now: float) -> None:
        self.legacy_generations.clear()
        for m in list(self.members.values()):
            if m.join_waiter is None:  # did not rejoin in time
                self._remove_member(m)
        self.join_deadline = None
        self.initial_delay_phase = False
        self.generation_id += 1
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader_id = None
            return
        self.protocol_name = self._select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        for m in self.members.values():
            waiter, m.join_waiter = m.join_waiter, None
            _resolve(waiter, self._join_result(m))
            m.session_deadline = now + m.session_timeout_ms / 1000
            self._note_deadline(m.session_deadline)
        self.pending_sync = set(self.members)
        self.sync_deadline = now + self._rebalance_timeout_ms() / 1000
        self._note_deadline(self.sync_deadline)

    # --- requests -------------------------------------------------------------------
    def join(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        now: float,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        """Handle JoinGroup; the caller has validated the group id and timeouts."""
        if self.state is GroupState.DEAD:
            return JoinGroupResult.failed(ErrorCode.coordinator_not_available, member_id)
        if not member_id:
            return self._join_unknown_member(
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=client_id,
                client_host=client_host,
                require_known_member_id=require_known_member_id,
                now=now,
            )
        if member_id in self.pending_members:
            if not self._supports_protocols(protocol_type, protocols, None):
                return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol, member_id)
            del self.pending_members[member_id]
            member = Member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                protocol_type,
                list(protocols),
                session_timeout_ms,
                rebalance_timeout_ms,
                now + session_timeout_ms / 1000,
            )
            return self._add_member(member, now)
        if self.is_static_member_fenced(group_instance_id, member_id):
            return JoinGroupResult.failed(ErrorCode.fenced_instance_id, member_id)
        existing = self.members.get(member_id)
        if existing is None:
            return JoinGroupResult.failed(ErrorCode.unknown_member_id, member_id)
        if not self._supports_protocols(protocol_type, protocols, member_id):
            return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol, member_id)
        existing.client_id, existing.client_host = client_id, client_host
        existing.protocol_type = protocol_type
        same_protocols = existing.protocols == list(protocols)
        if self.state is GroupState.COMPLETING_REBALANCE and same_protocols:
            # The member lost our JoinGroup response; send it again.
            return self._join_result(existing)
        if self.state is GroupState.STABLE and same_protocols and member_id != self.leader_id:
            return self._join_result(existing)
        return self._update_member(
            existing, protocols, session_timeout_ms, rebalance_timeout_ms, now
        )

    def _join_unknown_member(
        self,
        *,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        now: float,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        old_id = (
            self.static_members.get(group_instance_id) if group_instance_id is not None else None
        )
        if not self._supports_protocols(protocol_type, protocols, old_id):
            return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol)
        max_size = self.config.group_max_size
        if (
            old_id is None
            and max_size is not None
            and len(self.members) + len(self.pending_members) >= max_size
        ):
            return JoinGroupResult.failed(ErrorCode.group_max_size_reached)
        new_id = f"{client_id}-{uuid.uuid4()}"
        member = Member(
            new_id,
            group_instance_id,
            client_id,
            client_host,
            protocol_type,
            list(protocols),
            session_timeout_ms,
            rebalance_timeout_ms,
            now + session_timeout_ms / 1000,
        )
        if old_id is not None and old_id in self.members:
            return self._replace_static_member(self.members[old_id], member, now)
        if group_instance_id is None and require_known_member_id:
            deadline = now + session_timeout_ms / 1000
            self.pending_members[new_id] = deadline
            self._note_deadline(deadline)
            return JoinGroupResult.failed(ErrorCode.member_id_required, new_id)
        return self._add_member(member, now)

    def _replace_static_member(
        self, old: Member, new: Member, now: float
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        """A static member came back with a new member id (KIP-345)."""
        _resolve(
            old.join_waiter, JoinGroupResult.failed(ErrorCode.fenced_instance_id, old.member_id)
        )
        _resolve(old.sync_waiter, SyncGroupResult.failed(ErrorCode.fenced_instance_id))
        old.join_waiter = old.sync_waiter = None
        new.assignment = old.assignment
        del self.members[old.member_id]
        self._count_protocols(old, -1)
        self.members[new.member_id] = new
        self._count_protocols(new, +1)
        assert new.group_instance_id is not None
        self.static_members[new.group_instance_id] = new.member_id
        if self.leader_id == old.member_id:
            self.leader_id = new.member_id
        if old.member_id in self.pending_sync:
            self.pending_sync.discard(old.member_id)
            self.pending_sync.add(new.member_id)
        self._note_deadline(new.session_deadline)
        if self.state is GroupState.STABLE and self._select_protocol() == self.protocol_name:
            # Nothing changes for the group: no rebalance, hand back the current generation.
            return self._join_result(new, skip_assignment=new.member_id == self.leader_id)
        fut: asyncio.Future[JoinGroupResult] = self._loop().create_future()
        new.join_waiter = fut
        if self.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now)
        self._try_complete_join(now)
        return fut

    def sync(
        self,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now: float,
    ) -> SyncGroupResult | asyncio.Future[SyncGroupResult]:
        if self.state is GroupState.DEAD:
            return SyncGroupResult.failed(ErrorCode.coordinator_not_available)
        if self.is_static_member_fenced(group_instance_id, member_id):
            return SyncGroupResult.failed(ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            return SyncGroupResult.failed(ErrorCode.unknown_member_id)
        if generation_id != self.generation_id:
            return SyncGroupResult.failed(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol_name
        ):
            return SyncGroupResult.failed(ErrorCode.inconsistent_group_protocol)
        if self.state is GroupState.EMPTY:
            return SyncGroupResult.failed(ErrorCode.unknown_member_id)
        if self.state is GroupState.PREPARING_REBALANCE:
            return SyncGroupResult.failed(ErrorCode.rebalance_in_progress)
        self._synced(member, now)
        if self.state is GroupState.STABLE:
            return SyncGroupResult(_NONE, self.protocol_type, self.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        _resolve(member.sync_waiter, SyncGroupResult.failed(ErrorCode.rebalance_in_progress))
        fut: asyncio.Future[SyncGroupResult] = self._loop().create_future()
        member.sync_waiter = fut
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.state = GroupState.STABLE
            for m in self.members.values():
                waiter, m.sync_waiter = m.sync_waiter, None
                _resolve(
                    waiter,
                    SyncGroupResult(_NONE, self.protocol_type, self.protocol_name, m.assignment),
                )
        return fut

    def _synced(self, member: Member, now: float) -> None:
        self.pending_sync.discard(member.member_id)
        if not self.pending_sync:
            self.sync_deadline = None
        member.session_deadline = now + member.session_timeout_ms / 1000

    def heartbeat(
        self, *, generation_id: int, member_id: str, group_instance_id: str | None, now: float
    ) -> int:
        if self.state is GroupState.DEAD:
            return int(ErrorCode.coordinator_not_available)
        if self.is_static_member_fenced(group_instance_id, member_id):
            return int(ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            return int(ErrorCode.unknown_member_id)
        if not self._generation_ok(member_id, generation_id):
            return int(ErrorCode.illegal_generation)
        if self.state is GroupState.EMPTY:
            return int(ErrorCode.unknown_member_id)
        member.session_deadline = now + member.session_timeout_ms / 1000
        if self.state is GroupState.PREPARING_REBALANCE:
            return int(ErrorCode.rebalance_in_progress)
        return _NONE

    def leave(self, members: list[tuple[str, str | None]], now: float) -> list[LeaveMemberResult]:
        results: list[LeaveMemberResult] = []
        for member_id, instance_id in members:
            code = self._leave_one(member_id, instance_id, now)
            results.append(LeaveMemberResult(member_id, instance_id, code))
        return results

    def _leave_one(self, member_id: str, instance_id: str | None, now: float) -> int:
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None or current not in self.members:
                return int(ErrorCode.unknown_member_id)
            if member_id and member_id != current:
                return int(ErrorCode.fenced_instance_id)
            self._remove_member_and_update(self.members[current], now)
            return _NONE
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._try_complete_join(now)
            return _NONE
        member = self.members.get(member_id)
        if member is None:
            return int(ErrorCode.unknown_member_id)
        self._remove_member_and_update(member, now)
        return _NONE

    def validate_commit(
        self, generation_id: int, member_id: str, group_instance_id: str | None, now: float
    ) -> int:
        """Kafka's ``validateOffsetCommit``; refreshes the member's session on success."""
        if self.state is GroupState.DEAD:
            return int(ErrorCode.coordinator_not_available)
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if self.is_static_member_fenced(group_instance_id, member_id):
                return int(ErrorCode.fenced_instance_id)
            member = self.members.get(member_id)
            if member is None:
                return int(ErrorCode.unknown_member_id)
            if not self._generation_ok(member_id, generation_id):
                return int(ErrorCode.illegal_generation)
            if self.state is GroupState.COMPLETING_REBALANCE:
                return int(ErrorCode.rebalance_in_progress)
            member.session_deadline = now + member.session_timeout_ms / 1000
            return _NONE
        if self.state is not GroupState.EMPTY:
            # Once the group has members, only members may commit.
            return int(ErrorCode.illegal_generation)
        return _NONE

    # --- timers -------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Apply every deadline that has passed, then note the next one."""
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now:
                del self.pending_members[member_id]
                self._try_complete_join(now)
        for member in list(self.members.values()):
            if member.member_id not in self.members:
                continue
            awaiting = member.join_waiter is not None or member.sync_waiter is not None
            if not awaiting and member.session_deadline <= now:
                self._remove_member_and_update(member, now)
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self.join_deadline is not None
            and self.join_deadline <= now
        ):
            if (
                self.initial_delay_phase
                and self.new_member_added
                and (self.initial_delay_remaining_ms > 0)
            ):
                delay_ms = min(
                    self.config.group_initial_rebalance_delay_ms, self.initial_delay_remaining_ms
                )
                self.initial_delay_remaining_ms -= delay_ms
                self.new_member_added = False
                self.join_deadline = now + delay_ms / 1000
            else:
                self._complete_join(now)
        if (
            self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            and self.sync_deadline is not None
            and self.sync_deadline <= now
        ):
            self.sync_deadline = None
            stragglers = [self.members[mid] for mid in self.pending_sync if mid in self.members]
            self.pending_sync.clear()
            for member in stragglers:
                if member.member_id in self.members:
                    self._remove_member_and_update(member, now)
        self.wake_at = math.inf
        # A deadline still in the past (an idle group whose lock is held) is
        # retried shortly rather than spun on.
        self._note_deadline(max(self.next_deadline(), now + _RETRY_S))

    def is_idle(self) -> bool:
        return self.state is GroupState.EMPTY and not self.members and not self.pending_members

    def note_idle(self, now: float) -> None:
        """Start (or stop) the countdown after which an idle group is forgotten."""
        if not self.is_idle():
            self.forget_deadline = None
        elif self.forget_deadline is None:
            self.forget_deadline = now + self.config.empty_group_retention_ms / 1000
            self._note_deadline(self.forget_deadline)

    def should_forget(self, now: float) -> bool:
        return (
            self.is_idle()
            and self.forget_deadline is not None
            and self.forget_deadline <= now
            and not self.lock.locked()
        )

    def next_deadline(self) -> float:
        deadlines = [d for d in self.pending_members.values()]
        if self.forget_deadline is not None:
            deadlines.append(self.forget_deadline)
        deadlines.extend(
            m.session_deadline
            for m in self.members.values()
            if m.join_waiter is None and m.sync_waiter is None
        )
        if self.join_deadline is not None:
            deadlines.append(self.join_deadline)
        if self.sync_deadline is not None:
            deadlines.append(self.sync_deadline)
        return min(deadlines, default=math.inf)

    # --- shutdown / deletion ----------------------------------------------------------
    def fail_waiters(self, error: ErrorCode) -> None:
        for m in self.members.values():
            _resolve(m.join_waiter, JoinGroupResult.failed(error, m.member_id))
            _resolve(m.sync_waiter, SyncGroupResult.failed(error))
            m.join_waiter = m.sync_waiter = None

    def mark_dead(self) -> None:
        self.state = GroupState.DEAD
        self.join_deadline = self.sync_deadline = None
        self.pending_members.clear()

    # --- describe --------------------------------------------------------------------
    def describe_members(self) -> list[MemberDescription]:
        stable = self.state is GroupState.STABLE
        return [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        ]
