"""One consumer group of the consumer group protocol (KIP-848): members,
epochs, the target assignment and each member's reconciliation.

The broker owns the assignment. The group epoch grows whenever the group
changes (a member joins, leaves, times out or changes its subscription; a
subscribed topic gains partitions); the target assignment is recomputed for
the new epoch by the server-side assignor. Each member then moves towards its
target on its own heartbeats:

1. partitions it holds that its target no longer has are revoked first: its
   assignment shrinks, its epoch stays, and it must confirm (a heartbeat whose
   owned partitions no longer include them) within its rebalance timeout;
2. then its epoch becomes the target epoch and it receives the partitions of
   its target that no other member still holds; the others ("unreleased")
   follow on later heartbeats, once their holders have let them go.

So a partition is never owned by two members at once. A member that stops
heartbeating for the session timeout, or does not revoke in time, is removed
and its partitions are free for the others. No I/O here: the coordinator
calls in with the time and the topics' partition counts.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ingest.group.consumer.assignor import ASSIGNORS
from ingest.protocol.errors import ErrorCode

__all__ = ["ClassicInfo", "ConsumerGroup", "ConsumerMember", "Heartbeat", "HeartbeatResult"]

Partition = tuple[str, int]
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
DEFAULT_ASSIGNOR = "uniform"


@dataclass(slots=True)
class ClassicInfo:
    """A member that speaks the classic protocol (JoinGroup, SyncGroup,
    Heartbeat) in a consumer group: what it joined with."""

    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int

    @property
    def protocol_name(self) -> str:
        """The protocol it prefers: the name its JoinGroup and SyncGroup answers carry."""
        return self.protocols[0][0] if self.protocols else ""


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed: set[str] = field(default_factory=set)
    regex: str | None = None
    assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    epoch: int = 0
    previous_epoch: int = -1
    assigned: set[Partition] = field(default_factory=set)  # what it was told it owns
    revoking: set[Partition] = field(default_factory=set)  # told to let go, not confirmed
    owned: set[Partition] | None = None  # what it last said it owns
    last_sent: set[Partition] | None = None
    session_deadline: float = 0.0
    revoke_deadline: float | None = None
    left: bool = False  # a static member gone for now (epoch -2): its place is kept
    classic: ClassicInfo | None = None  # a member of the classic protocol

    def session_timeout_ms(self, default_ms: int) -> int:
        return self.classic.session_timeout_ms if self.classic is not None else default_ms

    def holds(self) -> set[Partition]:
        return self.assigned | self.revoking | (self.owned or set())


@dataclass(frozen=True, slots=True)
class Heartbeat:
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: set[str] | None = None  # None: unchanged
    regex: str | None = None
    assignor: str | None = None
    owned: set[Partition] | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = -1
    assignment: set[Partition] | None = None  # None: unchanged
    message: str | None = None


class ConsumerGroup:
    def __init__(self, group_id: str, session_timeout_ms: int) -> None:
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.epoch = 0
        self.target_epoch = 0
        self.target: dict[str, set[Partition]] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.topics_seen: dict[str, int] = {}
        self.assignor_name = DEFAULT_ASSIGNOR
        self.empty_since: float | None = None
        # member ids handed to classic members with MEMBER_ID_REQUIRED -> deadline
        self.pending_classic: dict[str, float] = {}

    # --- what it looks like ------------------------------------------------------
    @property
    def state(self) -> str:
        """Kafka's names: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.target_epoch < self.epoch:
            return "Assigning"
        for m in self.members.values():
            # a classic member keeps the epoch it joined at while its
            # assignment does not change (a new one would mean a rejoin)
            behind = m.epoch != self.target_epoch and m.classic is None
            if behind or m.revoking or m.assigned != self.target.get(m.member_id, set()):
                return "Reconciling"
        return "Stable"

    def classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    # --- heartbeats ------------------------------------------------------------------
    def heartbeat(
        self, hb: Heartbeat, topics: Callable[[], Mapping[str, int]], now: float
    ) -> HeartbeatResult:
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb, now)
        changed = False  # the group epoch grows by one per heartbeat at most
        if hb.member_epoch == 0:
            joined = self._join(hb, now)
            if isinstance(joined, HeartbeatResult):
                return joined
            member, changed = joined
        else:
            found = self.members.get(hb.member_id)
            if found is None or found.left or found.classic is not None:
                return HeartbeatResult(ErrorCode.unknown_member_id, message="unknown member id")
            member = found
            if hb.member_epoch != member.epoch and not (
                hb.member_epoch == member.previous_epoch
                and (hb.owned is None or hb.owned <= member.assigned | member.revoking)
            ):
                return HeartbeatResult(
                    ErrorCode.fenced_member_epoch,
                    message=f"epoch {hb.member_epoch}, the member's is {member.epoch}",
                )
        changed = self._update(member, hb, now) or changed
        counts = dict(topics())
        self.maybe_assign(counts, changed)
        self._reconcile(member, now)
        send = (
            hb.member_epoch == 0
            or member.last_sent != member.assigned
            or (hb.owned is not None and hb.owned != member.assigned)
        )
        if send:
            member.last_sent = set(member.assigned)
        return HeartbeatResult(
            ErrorCode.none,
            member.member_id,
            member.epoch,
            set(member.assigned) if send else None,
        )

    def _join(self, hb: Heartbeat, now: float) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        """The joining member, and whether the group changed."""
        if hb.subscribed is None and hb.regex is None:
            return HeartbeatResult(
                ErrorCode.invalid_request, message="a joining member must name its subscription"
            )
        if hb.assignor is not None and hb.assignor not in ASSIGNORS:
            return HeartbeatResult(
                ErrorCode.unsupported_assignor, message=f"unknown assignor {hb.assignor!r}"
            )
        member_id = hb.member_id or str(uuid.uuid4())
        if hb.instance_id is not None:
            holder = next(
                (m for m in self.members.values() if m.instance_id == hb.instance_id), None
            )
            if holder is not None and holder.member_id != member_id:
                if not holder.left:
                    return HeartbeatResult(
                        ErrorCode.unreleased_instance_id,
                        message=f"instance {hb.instance_id!r} is in use by another member",
                    )
                # a static member back: it takes its old place and partitions
                old_id = holder.member_id
                del self.members[old_id]
                self.target[member_id] = self.target.pop(old_id, set())
                holder.member_id = member_id
                holder.left = False
                holder.owned = None
                holder.last_sent = None
                self.members[member_id] = holder
                return holder, False
        member = self.members.get(member_id)
        if member is None:
            member = ConsumerMember(member_id, hb.client_id, hb.client_host)
            self.members[member_id] = member
        elif member.classic is not None:
            # a classic member has this id (and may still hold partitions)
            return HeartbeatResult(ErrorCode.unknown_member_id, message="a classic member's id")
        else:  # a member joining again: it starts over
            member.assigned, member.revoking, member.owned, member.last_sent = (
                set(),
                set(),
                None,
                None,
            )
            member.previous_epoch, member.epoch = -1, 0
        self.empty_since = None
        return member, True

    def _leave(self, hb: Heartbeat, now: float) -> HeartbeatResult:
        member = self.members.get(hb.member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, message="unknown member id")
        if hb.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # its place and partitions wait for it until its session ends
            member.left = True
            member.session_deadline = now + self.session_timeout_ms / 1000
        else:
            self.remove(member.member_id, now)
        return HeartbeatResult(ErrorCode.none, hb.member_id, hb.member_epoch)

    def _update(self, member: ConsumerMember, hb: Heartbeat, now: float) -> bool:
        """Take what the heartbeat says; whether the group changed."""
        changed = False
        member.session_deadline = now + member.session_timeout_ms(self.session_timeout_ms) / 1000
        member.client_id = hb.client_id or member.client_id
        member.client_host = hb.client_host or member.client_host
        member.instance_id = hb.instance_id if hb.instance_id is not None else member.instance_id
        member.rack_id = hb.rack_id if hb.rack_id is not None else member.rack_id
        if hb.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.assignor is not None and hb.assignor in ASSIGNORS:
            if hb.assignor != self.assignor_name:
                self.assignor_name = hb.assignor
                changed = True
        if hb.subscribed is not None and hb.subscribed != member.subscribed:
            member.subscribed = set(hb.subscribed)
            changed = True
        if hb.regex is not None and (hb.regex or None) != member.regex:
            member.regex = hb.regex or None
            changed = True
        if hb.owned is not None:
            member.owned = set(hb.owned)
        return changed

    def _subscription(self, member: ConsumerMember, counts: Mapping[str, int]) -> set[str]:
        names = {t for t in member.subscribed if t in counts}
        if member.regex:
            try:
                pattern = re.compile(member.regex)
            except re.error:
                return names
            names |= {t for t in counts if pattern.fullmatch(t)}
        return names

    def maybe_assign(self, counts: Mapping[str, int], changed: bool) -> None:
        subscriptions = {m.member_id: self._subscription(m, counts) for m in self.members.values()}
        seen = {t: counts[t] for subs in subscriptions.values() for t in subs}
        if changed or seen != self.topics_seen:
            # members or subscriptions changed, or topics (re)appeared or
            # gained partitions
            self.epoch += 1
        if self.target_epoch == self.epoch:
            return
        assign = ASSIGNORS[self.assignor_name]
        self.target = assign(subscriptions, seen, self.target)
        self.topics_seen = seen
        self.target_epoch = self.epoch

    def _reconcile(self, member: ConsumerMember, now: float) -> None:
        target = self.target.get(member.member_id, set())
        if member.revoking:
            still = member.revoking & (
                member.owned if member.owned is not None else member.revoking
            )
            if still:
                return  # waiting for it to let go
            member.revoking = set()
            member.revoke_deadline = None
        to_revoke = member.assigned - target
        if to_revoke:
            member.assigned -= to_revoke
            member.revoking = to_revoke
            member.revoke_deadline = now + member.rebalance_timeout_ms / 1000
            return
        if member.epoch != self.target_epoch:
            member.previous_epoch, member.epoch = member.epoch, self.target_epoch
        taken: set[Partition] = set()
        for other in self.members.values():
            if other is not member:
                taken |= other.holds()
        member.assigned |= {tp for tp in target if tp not in taken}

    # --- time ------------------------------------------------------------------------
    def tick(self, now: float) -> list[str]:
        """Remove members past their session or revocation deadline; returns them."""
        gone = [
            m.member_id
            for m in self.members.values()
            if m.session_deadline < now
            or (m.revoke_deadline is not None and m.revoke_deadline < now)
        ]
        for member_id in gone:
            self.remove(member_id, now)
        for member_id, deadline in list(self.pending_classic.items()):
            if deadline < now:
                del self.pending_classic[member_id]
        return gone

    def remove(self, member_id: str, now: float) -> None:
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.epoch += 1
        if not self.members:
            self.empty_since = now

    # --- offsets ------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetCommit v9+ (and OffsetFetch v9+ with a member): the member
        must exist, at its current epoch. Without a member (an admin tool,
        epoch -1) the commit is accepted, as Kafka accepts "simple" commits."""
        if not member_id and member_epoch < 0:
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none
