"""The reads of this broker, answered from its own state (no round trip)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from api.cluster_reads.model import (
    Assignment,
    GroupInfo,
    ListedGroup,
    MemberInfo,
    PartitionEnds,
    TopicPartition,
    decode_assignment,
)

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["LocalReads"]


def _by_topic(partitions: Iterable[TopicPartition]) -> Assignment:
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        grouped.setdefault(topic, []).append(partition)
    return tuple((t, tuple(ps)) for t, ps in grouped.items())


class LocalReads:
    """:class:`~api.cluster_reads.model.BrokerReads` of the broker this
    process runs (what its ListGroups, DescribeGroups, ConsumerGroupDescribe
    and ListOffsets handlers would answer)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def list_groups(self) -> list[ListedGroup]:
        consumer = self._broker.consumer_groups.groups
        out = [
            ListedGroup(g.group_id, g.protocol_type, g.state, "classic")
            for g in await self._broker.groups.list_groups()
            if g.group_id not in consumer
        ]
        out += [
            ListedGroup(group_id, "consumer", group.state, "consumer")
            for group_id, group in sorted(consumer.items())
        ]
        return out

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        consumer = self._broker.consumer_groups.groups
        out: dict[str, GroupInfo] = {}
        for group_id in group_ids:
            group = consumer.get(group_id)
            if group is None:
                continue
            out[group_id] = GroupInfo(
                group_id=group_id,
                state=group.state,
                protocol_type="consumer",
                protocol=group.assignor_name,
                group_type="consumer",
                members=tuple(
                    MemberInfo(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        m.instance_id,
                        _by_topic(m.assigned),
                    )
                    for m in group.members.values()
                ),
            )
        classic = [g for g in group_ids if g not in out]
        for d in await self._broker.groups.describe_groups(classic) if classic else []:
            out[d.group_id] = GroupInfo(
                group_id=d.group_id,
                state=d.state,
                protocol_type=d.protocol_type,
                protocol=d.protocol,
                members=tuple(
                    MemberInfo(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        m.group_instance_id,
                        decode_assignment(m.assignment),
                    )
                    for m in d.members
                ),
            )
        return out

    async def partition_sizes(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for topic, partition in partitions:
            plog = self._broker.logs.partition(topic, partition)
            if plog is not None:
                out[(topic, partition)] = await plog.retained_bytes()
        return out

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        out: dict[TopicPartition, PartitionEnds] = {}
        for topic, partition in partitions:
            plog = self._broker.logs.partition(topic, partition)
            if plog is None:
                out[(topic, partition)] = PartitionEnds(None, None)
            else:
                start = plog.log_start_offset if earliest else None
                out[(topic, partition)] = PartitionEnds(start, plog.high_watermark)
        return out
