"""The coordinator's ``MarkerWriter`` over this broker's partition logs and
its ``OffsetSink`` over the group coordinator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ingest.group.coordinator import GroupCoordinator
from ingest.log.manager import LogManager
from ingest.metadata.api import CommittedOffset
from ingest.protocol.errors import ErrorCode
from ingest.txn.model import PendingOffset

__all__ = ["LogMarkerWriter", "GroupOffsetSink"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]


class LogMarkerWriter:
    def __init__(self, logs: LogManager) -> None:
        self._logs = logs

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[Partition],
    ) -> dict[Partition, ErrorCode]:
        out: dict[Partition, ErrorCode] = {}
        waits: dict[Partition, asyncio.Future[int]] = {}
        for topic, index in partitions:
            plog = self._logs.partition(topic, index)
            if plog is None:
                gone = not self._logs.has_partition(topic, index)
                out[(topic, index)] = (
                    ErrorCode.unknown_topic_or_partition
                    if gone
                    else ErrorCode.not_leader_or_follower
                )
                continue
            outcome = plog.write_marker(producer_id, producer_epoch, commit, coordinator_epoch)
            if outcome.error != ErrorCode.none or outcome.durable is None:
                out[(topic, index)] = outcome.error
                continue
            waits[(topic, index)] = asyncio.ensure_future(outcome.durable)
        if waits:
            await asyncio.wait(waits.values())
        for tp, fut in waits.items():
            if fut.cancelled() or fut.exception() is not None:
                log.warning("marker for %s-%d not durable: %s", *tp, fut)
                out[tp] = ErrorCode.kafka_storage_error
            else:
                out[tp] = ErrorCode.none
        return out


class GroupOffsetSink:
    """The coordinator's ``OffsetSink``: a committed transaction's offsets
    become the group's, through the group coordinator."""

    def __init__(self, groups: GroupCoordinator) -> None:
        self._groups = groups

    async def commit_transactional_offsets(
        self, group: str, offsets: Sequence[PendingOffset]
    ) -> None:
        await self._groups.commit_transactional_offsets(
            group,
            [
                CommittedOffset(o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, -1)
                for o in offsets
            ],
        )
