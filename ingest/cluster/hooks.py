"""The broker's side of leadership: what a :class:`ClusterMember` does to
partitions, carried out on the broker's :class:`LogManager`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ingest.cluster.api import BrokerInfo, ClusterStore
from ingest.cluster.config import ClusterConfig
from ingest.log.manager import LogManager

__all__ = ["BrokerLeadership", "ClusterSetup"]

log = logging.getLogger(__name__)

Recover = Callable[[BrokerInfo], Awaitable[None]]


@dataclass(frozen=True)
class ClusterSetup:
    """What a broker needs to join a cluster (built by the process assembly)."""

    store: ClusterStore
    config: ClusterConfig
    rack: str | None
    object_prefix: str  # this broker's WAL prefix, for whoever recovers it
    recover: Recover  # replays a dead broker's write-ahead log into objects


class BrokerLeadership:
    """:class:`~ingest.cluster.member.LeadershipHooks` over a log manager."""

    def __init__(self, logs: LogManager, recover: Recover, on_fatal: Callable[[str], None]) -> None:
        self._logs = logs
        self._recover = recover
        self._on_fatal = on_fatal

    async def lead(self, topic: str, partition: int, leader_epoch: int) -> None:
        await self._logs.open_partition(topic, partition, leader_epoch)

    async def resign(self, topic: str, partition: int) -> None:
        await self._logs.close_partition(topic, partition)

    def begin_move(self, topic: str, partition: int) -> None:
        self._logs.begin_move(topic, partition)

    def end_move(self, topic: str, partition: int) -> None:
        self._logs.end_move(topic, partition)

    async def recover_node(self, broker: BrokerInfo) -> None:
        await self._recover(broker)

    async def topics_changed(self) -> None:
        await self._logs.refresh()

    def traffic(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {
            (name, index): (plog.appended_bytes, plog.fetched_bytes)
            for name, topic in self._logs.topics.items()
            for index, plog in topic.logs.items()
        }

    def fenced(self, reason: str) -> None:
        log.critical("%s: stopping", reason)
        self._on_fatal(reason)
