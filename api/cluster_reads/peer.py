"""The reads of another broker of the cluster, over the Kafka protocol
(ListGroups v5, DescribeGroups v5, ConsumerGroupDescribe v0, ListOffsets v7,
DescribeLogDirs v4)
through :func:`ingest.cluster.peer_client.peer_request`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v0.response import (
    Assignment as WireAssignment,
)
from kio.schema.consumer_group_describe.v0.response import ConsumerGroupDescribeResponse
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v4.response import DescribeLogDirsResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from api.cluster_reads.model import (
    Assignment,
    GroupInfo,
    ListedGroup,
    MemberInfo,
    PartitionEnds,
    TopicPartition,
    decode_assignment,
)
from ingest.cluster.peer_client import peer_request
from ingest.cluster.peer_connection import PeerSecurity
from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.errors import ErrorCode

__all__ = ["NoListenerReads", "PeerReads", "PeerError"]

_LIST_OFFSETS, _DESCRIBE_GROUPS, _LIST_GROUPS, _CONSUMER_GROUP_DESCRIBE = 2, 15, 16, 69
_DESCRIBE_LOG_DIRS = 35
_LATEST, _EARLIEST = -1, -2
_READ_UNCOMMITTED = i8(0)  # the high watermark, as Kafka's lag tools read it
_CLIENT_ID = "tidelake-console"


class PeerError(Exception):
    """A peer answered with an error for the whole request."""


def _assignment(wire: WireAssignment) -> Assignment:
    return tuple(
        (str(t.topic_name), tuple(sorted(int(p) for p in t.partitions)))
        for t in sorted(wire.topic_partitions, key=lambda t: str(t.topic_name))
    )


class PeerReads:
    """:class:`~api.cluster_reads.model.BrokerReads` of the broker at
    ``endpoint``; each call is one or two round trips bounded by ``timeout_s``,
    over a connection secured as ``security`` says (the inter-broker listener's
    TLS and SASL; None: PLAINTEXT)."""

    def __init__(
        self, endpoint: BrokerEndpoint, timeout_s: float, security: PeerSecurity | None = None
    ) -> None:
        self.endpoint = endpoint
        self._timeout_s = timeout_s
        self._security = security

    async def _call(self, api_key: int, version: int, request: object) -> object:
        return await peer_request(
            self.endpoint,
            api_key,
            version,
            request,
            self._timeout_s,
            _CLIENT_ID,
            security=self._security,
        )

    async def list_groups(self) -> list[ListedGroup]:
        response = await self._call(_LIST_GROUPS, 5, ListGroupsRequest(states_filter=()))
        assert isinstance(response, ListGroupsResponse)
        if response.error_code != ErrorCode.none:
            raise PeerError(f"ListGroups: {ErrorCode(response.error_code).name}")
        return [
            ListedGroup(str(g.group_id), g.protocol_type, g.group_state, g.group_type or "classic")
            for g in response.groups
        ]

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        """A group the peer answers with an error for (it stopped coordinating
        it, say) is left out, as a group of a peer that did not answer is."""
        ids = tuple(GroupId(g) for g in group_ids)
        consumer, classic = await asyncio.gather(
            self._call(
                _CONSUMER_GROUP_DESCRIBE,
                0,
                ConsumerGroupDescribeRequest(group_ids=ids, include_authorized_operations=False),
            ),
            self._call(
                _DESCRIBE_GROUPS,
                5,
                DescribeGroupsRequest(groups=ids, include_authorized_operations=False),
            ),
        )
        assert isinstance(consumer, ConsumerGroupDescribeResponse)
        assert isinstance(classic, DescribeGroupsResponse)
        out: dict[str, GroupInfo] = {}
        for c in consumer.groups:
            if c.error_code != ErrorCode.none:
                continue  # GROUP_ID_NOT_FOUND: not a KIP-848 group; the classic answer tells
            out[str(c.group_id)] = GroupInfo(
                group_id=str(c.group_id),
                state=c.group_state,
                protocol_type="consumer",
                protocol=c.assignor_name,
                group_type="consumer",
                members=tuple(
                    MemberInfo(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        m.instance_id,
                        _assignment(m.assignment),
                    )
                    for m in c.members
                ),
            )
        for d in classic.groups:
            if str(d.group_id) in out:
                continue
            if d.error_code != ErrorCode.none:
                continue  # e.g. moving to another coordinator: this group is not described
            out[str(d.group_id)] = GroupInfo(
                group_id=str(d.group_id),
                state=d.group_state,
                protocol_type=d.protocol_type,
                protocol=d.protocol_data,
                members=tuple(
                    MemberInfo(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        m.group_instance_id,
                        decode_assignment(m.member_assignment),
                    )
                    for m in d.members
                ),
            )
        return out

    async def _list_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int | None]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=_READ_UNCOMMITTED,
            topics=tuple(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp))
                        for p in ps
                    ),
                )
                for topic, ps in by_topic.items()
            ),
        )
        response = await self._call(_LIST_OFFSETS, 7, request)
        assert isinstance(response, ListOffsetsResponse)
        return {
            (str(t.name), int(p.partition_index)): (
                int(p.offset) if p.error_code == ErrorCode.none and p.offset >= 0 else None
            )
            for t in response.topics
            for p in t.partitions
        }

    async def offsets_for(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets for a time (ms): the first offset at or after it, None if none."""
        return await self._list_offsets(partitions, timestamp)

    async def partition_sizes(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = DescribeLogDirsRequest(
            topics=tuple(
                DescribableLogDirTopic(
                    topic=TopicName(topic), partitions=tuple(i32(p) for p in sorted(ps))
                )
                for topic, ps in by_topic.items()
            )
        )
        response = await self._call(_DESCRIBE_LOG_DIRS, 4, request)
        assert isinstance(response, DescribeLogDirsResponse)
        if response.error_code != ErrorCode.none:
            raise PeerError(f"DescribeLogDirs: {ErrorCode(response.error_code).name}")
        return {
            (str(t.name), int(p.partition_index)): int(p.partition_size)
            for d in response.results
            if d.error_code == ErrorCode.none
            for t in d.topics
            for p in t.partitions
        }

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        if not partitions:
            return {}
        if earliest:
            latest, first = await asyncio.gather(
                self._list_offsets(partitions, _LATEST), self._list_offsets(partitions, _EARLIEST)
            )
        else:
            latest, first = await self._list_offsets(partitions, _LATEST), {}
        return {
            tp: PartitionEnds(first.get(tp) if earliest else None, latest.get(tp))
            for tp in partitions
        }


class NoListenerReads:
    """A broker without this broker's inter-broker listener: it cannot be
    asked, and every read says so (the caller names it as not answering)."""

    def __init__(self, node_id: int, listener: str) -> None:
        self._why = f"broker {node_id} has no listener {listener}"

    async def list_groups(self) -> list[ListedGroup]:
        raise PeerError(self._why)

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        raise PeerError(self._why)

    async def partition_sizes(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        raise PeerError(self._why)

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        raise PeerError(self._why)
