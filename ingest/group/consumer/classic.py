"""Classic members of a consumer group (KIP-848's online migration).

While an application rolls from ``group.protocol=classic`` to ``consumer``
(or back), one group holds members of both protocols. The classic ones keep
sending JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit; the
broker's assignor decides for them as for the others:

* JoinGroup updates the member's subscription and the partitions it says it
  still owns (its ConsumerProtocol metadata), recomputes the target if the
  group changed, and answers at once with the member's epoch as generation
  and no member list: no classic member leads, none runs an assignor.
* The member's new assignment is what it still owns of its target plus the
  target's partitions nobody else holds; SyncGroup hands it over as a
  ConsumerProtocol assignment. Partitions it owns outside its target are
  "revoking" until it joins again without them (a cooperative client does,
  an eager one has let everything go before it joins).
* Heartbeat answers REBALANCE_IN_PROGRESS when the member must give
  partitions up, or when partitions of its target have become free: the
  client then joins again (revoking first). A member that does not come
  back within its rebalance timeout is removed, as is one whose session
  ends.

So a partition never has two owners across both kinds of member: a consumer
member only gets what no classic member holds (its last assignment and what
it last said it owns), and the reverse. No I/O here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from ingest.group.consumer.classic_codec import decode_subscription, encode_assignment
from ingest.group.consumer.group import ClassicInfo, ConsumerGroup, ConsumerMember, Partition
from ingest.group.types import JoinGroupResult, LeaveMemberResult, MigrationPolicy, SyncGroupResult
from ingest.protocol.errors import ErrorCode

__all__ = [
    "join",
    "sync",
    "heartbeat",
    "leave",
    "validate_generation",
    "can_downgrade",
    "PROTOCOL_TYPE",
]

PROTOCOL_TYPE = "consumer"
_NONE = int(ErrorCode.none)

Topics = Callable[[], Mapping[str, int]]


def _held_by_others(group: ConsumerGroup, member: ConsumerMember) -> set[Partition]:
    taken: set[Partition] = set()
    for other in group.members.values():
        if other is not member:
            taken |= other.holds()
    return taken


def _reconcile(group: ConsumerGroup, member: ConsumerMember, now: float) -> None:
    """The member joined: its next assignment and epoch."""
    assert member.classic is not None
    target = group.target.get(member.member_id, set())
    owned = member.owned or set()
    member.revoking = owned - target
    member.assigned = (owned & target) | (target - _held_by_others(group, member))
    member.previous_epoch, member.epoch = member.epoch, group.target_epoch
    member.revoke_deadline = (
        now + member.classic.rebalance_timeout_ms / 1000 if member.revoking else None
    )
    member.last_sent = set(member.assigned)


def needs_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """It must let partitions go, or partitions of its target are free for it."""
    target = group.target.get(member.member_id, set())
    if member.revoking or member.assigned - target:
        return True
    missing = target - member.assigned
    return bool(missing and missing - _held_by_others(group, member))


def _fenced(group: ConsumerGroup, member_id: str, instance_id: str | None) -> bool:
    if instance_id is None:
        return False
    holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
    return holder is not None and holder.member_id != member_id


def _classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerMember | int:
    if _fenced(group, member_id, instance_id):
        return int(ErrorCode.fenced_instance_id)
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        return int(ErrorCode.unknown_member_id)
    return member


def join(
    group: ConsumerGroup,
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
    topics: Topics,
    now: float,
) -> JoinGroupResult:
    """JoinGroup of a classic member; answered at once (nobody waits)."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol, member_id)
    subscription = decode_subscription(protocols[0][1])
    if subscription is None:
        return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol, member_id)
    changed = False
    if not member_id:
        holder = (
            next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if instance_id is not None
            else None
        )
        new_id = f"{client_id}-{uuid.uuid4()}"
        if holder is not None:
            # a static member back with a new member id: it takes the old place
            del group.members[holder.member_id]
            group.target[new_id] = group.target.pop(holder.member_id, set())
            holder.member_id, holder.left = new_id, False
            group.members[new_id] = holder
            member = holder
        elif instance_id is None and require_known_member_id:
            group.pending_classic[new_id] = now + session_timeout_ms / 1000
            return JoinGroupResult.failed(ErrorCode.member_id_required, new_id)
        else:
            member = group.members[new_id] = ConsumerMember(new_id, client_id, client_host)
            changed = True
    elif member_id in group.pending_classic:
        del group.pending_classic[member_id]
        member = group.members[member_id] = ConsumerMember(member_id, client_id, client_host)
        changed = True
    else:
        found = _classic_member(group, member_id, instance_id)
        if isinstance(found, int):
            return JoinGroupResult.failed(ErrorCode(found), member_id)
        member = found
    member.classic = ClassicInfo(
        protocol_type, list(protocols), session_timeout_ms, rebalance_timeout_ms
    )
    member.instance_id = instance_id if instance_id is not None else member.instance_id
    member.client_id, member.client_host = client_id, client_host
    member.rebalance_timeout_ms = rebalance_timeout_ms
    member.session_deadline = now + session_timeout_ms / 1000
    if set(subscription.topics) != member.subscribed:
        member.subscribed = set(subscription.topics)
        changed = True
    member.owned = set(subscription.owned)
    group.empty_since = None
    group.maybe_assign(dict(topics()), changed)
    _reconcile(group, member, now)
    leader = next((m for m in group.members if m != member.member_id), "")
    return JoinGroupResult(
        _NONE,
        member.epoch,
        PROTOCOL_TYPE,
        member.classic.protocol_name,
        leader,  # never the member itself: it runs no assignor
        member.member_id,
    )


def sync(
    group: ConsumerGroup,
    *,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    protocol_type: str | None,
    protocol_name: str | None,
    now: float,
) -> SyncGroupResult:
    """SyncGroup of a classic member: the assignment its JoinGroup settled."""
    found = _classic_member(group, member_id, instance_id)
    if isinstance(found, int):
        return SyncGroupResult.failed(ErrorCode(found))
    member = found
    assert member.classic is not None
    if generation_id != member.epoch:
        return SyncGroupResult.failed(ErrorCode.illegal_generation)
    if (protocol_type is not None and protocol_type != member.classic.protocol_type) or (
        protocol_name is not None and protocol_name != member.classic.protocol_name
    ):
        return SyncGroupResult.failed(ErrorCode.inconsistent_group_protocol)
    member.session_deadline = now + member.classic.session_timeout_ms / 1000
    return SyncGroupResult(
        _NONE,
        member.classic.protocol_type,
        member.classic.protocol_name,
        encode_assignment(member.assigned),
    )


def heartbeat(
    group: ConsumerGroup,
    *,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    topics: Topics,
    now: float,
) -> int:
    found = _classic_member(group, member_id, instance_id)
    if isinstance(found, int):
        return found
    member = found
    assert member.classic is not None
    if generation_id != member.epoch:
        return int(ErrorCode.illegal_generation)
    member.session_deadline = now + member.classic.session_timeout_ms / 1000
    group.maybe_assign(dict(topics()), False)
    if not needs_rejoin(group, member):
        return _NONE
    target = group.target.get(member.member_id, set())
    if member.assigned - target and member.revoke_deadline is None:
        member.revoke_deadline = now + member.classic.rebalance_timeout_ms / 1000
    return int(ErrorCode.rebalance_in_progress)


def leave(
    group: ConsumerGroup, members: list[tuple[str, str | None]], now: float
) -> list[LeaveMemberResult]:
    out: list[LeaveMemberResult] = []
    for member_id, instance_id in members:
        if instance_id is not None:
            holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
            if holder is None:
                code = int(ErrorCode.unknown_member_id)
            elif member_id and member_id != holder.member_id:
                code = int(ErrorCode.fenced_instance_id)
            else:
                group.remove(holder.member_id, now)
                code = _NONE
        elif member_id in group.pending_classic:
            del group.pending_classic[member_id]
            code = _NONE
        elif member_id in group.members:
            group.remove(member_id, now)
            code = _NONE
        else:
            code = int(ErrorCode.unknown_member_id)
        out.append(LeaveMemberResult(member_id, instance_id, code))
    return out


def validate_generation(
    group: ConsumerGroup, member: ConsumerMember, generation_id: int, now: float
) -> ErrorCode:
    """An offset commit of a classic member: its generation is its epoch."""
    assert member.classic is not None
    if generation_id != member.epoch:
        return ErrorCode.illegal_generation
    member.session_deadline = now + member.classic.session_timeout_ms / 1000
    return ErrorCode.none


def can_downgrade(policy: MigrationPolicy, group: ConsumerGroup) -> bool:
    """Only classic members are left, and they share a protocol."""
    members = list(group.members.values())
    if not policy.downgrades or not members or any(m.classic is None for m in members):
        return False
    common = {name for name, _ in members[0].classic.protocols} if members[0].classic else set()
    for m in members[1:]:
        assert m.classic is not None
        common &= {name for name, _ in m.classic.protocols}
    return bool(common)
