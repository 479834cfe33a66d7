"""Online migration between the classic and the consumer group protocol
(KIP-848, Kafka's ``group.consumer.migration.policy``).

* Upgrade: the first consumer-protocol member joining a classic group with
  members (protocol type ``consumer``) turns it into a consumer group. Its
  classic members stay, at an epoch equal to the classic generation, each
  holding what it was assigned and what its JoinGroup metadata says it
  owns; the group's target starts as those holdings, so the assignor moves
  as little as it can.
* Downgrade: when the last consumer-protocol member leaves a group whose
  other members are all classic, it becomes a classic group again, in
  PreparingRebalance: the members rejoin and their leader assigns. Until
  that rebalance ends each member's epoch in the consumer group is accepted
  as its generation (heartbeats answer REBALANCE_IN_PROGRESS, commits
  succeed), so nothing is lost in the switch.

Committed offsets live in the metadata store under the group id, whatever
the protocol: every conversion keeps them. No I/O here.
"""

from __future__ import annotations

from ingest.group.consumer.classic import PROTOCOL_TYPE, can_downgrade
from ingest.group.consumer.classic_codec import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ingest.group.consumer.group import ClassicInfo, ConsumerGroup, ConsumerMember, Partition
from ingest.group.group import Group, Member
from ingest.group.types import GroupConfig, GroupState, MigrationPolicy

__all__ = ["MigrationPolicy", "can_upgrade", "can_downgrade", "to_consumer", "to_classic"]


def can_upgrade(policy: MigrationPolicy, group: Group) -> bool:
    """A classic group with members that a consumer-protocol member may join."""
    return (
        policy.upgrades
        and group.state is not GroupState.DEAD
        and group.protocol_type == PROTOCOL_TYPE
        and all(
            decode_subscription(m.metadata_for(_protocol(group, m))) for m in group.members.values()
        )
    )


def _protocol(group: Group, member: Member) -> str | None:
    return group.protocol_name or (member.protocols[0][0] if member.protocols else None)


def to_consumer(group: Group, session_timeout_ms: int, now: float) -> ConsumerGroup:
    """The consumer group that ``group`` becomes; the caller fails the
    classic group's waiting JoinGroup/SyncGroup calls (they rejoin)."""
    out = ConsumerGroup(group.group_id, session_timeout_ms)
    out.epoch = out.target_epoch = max(group.generation_id, 0)
    for m in group.members.values():
        subscription = decode_subscription(m.metadata_for(_protocol(group, m)))
        held: set[Partition] = set(decode_assignment(m.assignment) or set())
        if subscription is not None:
            held |= subscription.owned
        member = ConsumerMember(
            m.member_id,
            m.client_id,
            m.client_host,
            instance_id=m.group_instance_id,
            subscribed=set(subscription.topics) if subscription is not None else set(),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            epoch=out.epoch,
            assigned=held,
            owned=set(held),
            last_sent=set(held),
            session_deadline=now + m.session_timeout_ms / 1000,
            classic=ClassicInfo(
                m.protocol_type, list(m.protocols), m.session_timeout_ms, m.rebalance_timeout_ms
            ),
        )
        out.members[m.member_id] = member
        out.target[m.member_id] = set(held)
    for member_id, deadline in group.pending_members.items():
        out.pending_classic[member_id] = deadline
    return out


def to_classic(group: ConsumerGroup, config: GroupConfig, now: float) -> Group:
    """The classic group that ``group`` (only classic members) becomes."""
    out = Group(group.group_id, config)
    members: list[tuple[Member, int]] = []
    for m in group.members.values():
        assert m.classic is not None
        member = Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.classic.protocol_type,
            list(m.classic.protocols),
            m.classic.session_timeout_ms,
            m.classic.rebalance_timeout_ms,
            now + m.classic.session_timeout_ms / 1000,
            assignment=encode_assignment(m.assigned),
        )
        members.append((member, m.epoch))
    out.adopt(members, group.epoch, now)
    return out
