"""Reads over every live broker of the cluster: each broker answers for what
it holds (the groups it coordinates, the partitions it leads), this broker
locally and the others over the Kafka protocol, all in parallel with a
timeout. A broker that does not answer is reported by node id, never raised:
the console shows a note and the numbers it could read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from api.cluster_reads.model import (
    BrokerReads,
    GroupInfo,
    ListedGroup,
    PartitionEnds,
    TopicPartition,
)
from ingest.cluster.view import BrokerEndpoint, ClusterView

__all__ = ["ClusterGroup", "ClusterReads", "GroupListing", "PartitionState"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_NO_ENDS = PartitionEnds(None, None)


@dataclass(frozen=True, slots=True)
class ClusterGroup:
    group_id: str
    state: str  # as its coordinator lists it; "Unknown" when the coordinator did not answer
    protocol_type: str
    group_type: str
    coordinator: int  # node id
    coordinator_answered: bool


@dataclass(frozen=True, slots=True)
class GroupListing:
    groups: list[ClusterGroup]
    unreachable: list[int]  # node ids of brokers that did not answer


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # node id, -1 while the partition has none
    ends: PartitionEnds


class ClusterReads:
    """``view`` is the broker's current cluster view (who is live, who leads,
    who coordinates); ``local`` answers for this broker, ``peer(endpoint)``
    for another; each broker gets ``timeout_s`` per call."""

    def __init__(
        self,
        view: Callable[[], ClusterView],
        local: BrokerReads,
        peer: Callable[[BrokerEndpoint], BrokerReads],
        timeout_s: float = 3.0,
    ) -> None:
        self._view = view
        self._local = local
        self._peer = peer
        self.timeout_s = timeout_s

    def _reads_of(self, view: ClusterView) -> dict[int, BrokerReads]:
        return {
            b.node_id: self._local if b.node_id == view.node_id else self._peer(b)
            for b in view.brokers()
        }

    async def _each(
        self, calls: dict[int, Callable[[], Awaitable[_T]]]
    ) -> tuple[dict[int, _T], list[int]]:
        """Run one call per node in parallel: (answers by node, nodes that did not answer)."""

        answers: dict[int, _T] = {}
        missing: list[int] = []

        async def one(node: int, call: Callable[[], Awaitable[_T]]) -> None:
            try:
                answers[node] = await asyncio.wait_for(call(), self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - any failure: that broker did not answer
                log.info("broker %d did not answer the console's read: %r", node, exc)
                missing.append(node)

        await asyncio.gather(*(one(n, c) for n, c in calls.items()))
        return answers, sorted(missing)

    async def list_groups(self) -> GroupListing:
        """Every group of the cluster, each as its coordinator lists it."""
        view = self._view()
        reads = self._reads_of(view)
        answers, unreachable = await self._each({n: r.list_groups for n, r in reads.items()})
        seen: dict[str, dict[int, ListedGroup]] = {}
        for node, listed in answers.items():
            for g in listed:
                seen.setdefault(g.group_id, {})[node] = g
        out: list[ClusterGroup] = []
        for group_id, by_node in sorted(seen.items()):
            coordinator = view.coordinator_for(group_id).node_id
            answered = coordinator in answers
            entry = by_node.get(coordinator) or next(iter(by_node.values()))
            out.append(
                ClusterGroup(
                    group_id=group_id,
                    state=entry.state if answered else "Unknown",
                    protocol_type=entry.protocol_type,
                    group_type=entry.group_type,
                    coordinator=coordinator,
                    coordinator_answered=answered,
                )
            )
        return GroupListing(out, unreachable)

    def coordinator(self, group_id: str) -> int:
        return self._view().coordinator_for(group_id).node_id

    async def describe_groups(
        self, group_ids: Sequence[str]
    ) -> tuple[dict[str, GroupInfo], list[int]]:
        """Each group as its coordinator describes it; a group whose
        coordinator did not answer is left out (its node is in the second item)."""
        view = self._view()
        reads = self._reads_of(view)
        by_node: dict[int, list[str]] = {}
        for g in group_ids:
            by_node.setdefault(view.coordinator_for(g).node_id, []).append(g)

        def call(node: int, ids: list[str]) -> Callable[[], Awaitable[dict[str, GroupInfo]]]:
            return lambda: reads[node].describe_groups(ids)

        answers, unreachable = await self._each(
            {node: call(node, ids) for node, ids in by_node.items() if node in reads}
        )
        unreachable += [n for n in by_node if n not in reads]
        out: dict[str, GroupInfo] = {}
        for described in answers.values():
            out.update(described)
        return out, sorted(unreachable)

    async def partitions(
        self, partitions: Sequence[TopicPartition], earliest: bool = False
    ) -> tuple[dict[TopicPartition, PartitionState], list[int]]:
        """Leader and ends of each partition, asked of its leader."""
        view = self._view()
        reads = self._reads_of(view)
        leaders = {tp: view.leader(*tp)[0] for tp in partitions}
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, leader in leaders.items():
            if leader in reads:
                by_node.setdefault(leader, []).append(tp)

        def call(
            node: int, tps: list[TopicPartition]
        ) -> Callable[[], Awaitable[dict[TopicPartition, PartitionEnds]]]:
            return lambda: reads[node].end_offsets(tps, earliest)

        answers, unreachable = await self._each(
            {node: call(node, tps) for node, tps in by_node.items()}
        )
        ends: dict[TopicPartition, PartitionEnds] = {}
        for answered in answers.values():
            ends.update(answered)
        out = {tp: PartitionState(leaders[tp], ends.get(tp, _NO_ENDS)) for tp in partitions}
        return out, unreachable

    async def partition_sizes(
        self, partitions: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], list[int]]:
        """Retained bytes of each partition, asked of its leader; a partition
        whose leader did not answer (its node in the second item) or that has
        no leader now is left out."""
        view = self._view()
        reads = self._reads_of(view)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            leader = view.leader(*tp)[0]
            if leader in reads:
                by_node.setdefault(leader, []).append(tp)

        def call(
            node: int, tps: list[TopicPartition]
        ) -> Callable[[], Awaitable[dict[TopicPartition, int]]]:
            return lambda: reads[node].partition_sizes(tps)

        answers, unreachable = await self._each(
            {node: call(node, tps) for node, tps in by_node.items()}
        )
        sizes: dict[TopicPartition, int] = {}
        for answered in answers.values():
            sizes.update(answered)
        return sizes, unreachable

    async def high_watermarks(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        states, _ = await self.partitions(partitions)
        return {tp: s.ends.high_watermark for tp, s in states.items()}
