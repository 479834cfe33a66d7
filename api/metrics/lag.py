"""Committed offsets and lag of consumer groups, against each partition's
high watermark as its leader reports it (in a cluster, partitions led by
other brokers are asked of them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from api.cluster_reads import ClusterReads
    from ingest.broker import Broker

__all__ = ["PartitionLag", "coordinated_groups", "group_lags"]


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int
    high_watermark: int | None  # None: the partition's leader did not answer

    @property
    def lag(self) -> int | None:
        if self.high_watermark is None:
            return None
        return max(0, self.high_watermark - self.committed)


async def coordinated_groups(broker: Broker) -> list[str]:
    """The groups this broker coordinates (every group of a single broker).
    In a cluster each group is exported by its coordinator only, so summing
    the brokers' gauges counts every group once."""
    view = broker.cluster
    names = {g.group_id for g in await broker.groups.list_groups()}
    names |= set(broker.consumer_groups.groups)
    return sorted(
        n for n in names if not view.clustered or view.coordinator_for(n).node_id == view.node_id
    )


async def group_lags(
    broker: Broker, reads: ClusterReads, groups: Sequence[str] | None = None
) -> list[PartitionLag]:
    """Every committed offset of ``groups`` (default: :func:`coordinated_groups`)
    with its lag. Committed offsets are read from the metadata store, which
    the brokers of a cluster share; high watermarks from the partitions'
    leaders. Runs on the event loop (store I/O happens in threads)."""
    names = await coordinated_groups(broker) if groups is None else list(groups)
    committed: list[tuple[str, str, int, int]] = []
    for name in names:
        result = await broker.groups.fetch_offsets(group_id=name, partitions=None)
        committed += [
            (name, o.topic, o.partition, o.offset) for o in result.partitions if o.offset >= 0
        ]
    hws = await reads.high_watermarks(sorted({(t, p) for _, t, p, _ in committed}))
    out = [PartitionLag(g, t, p, o, hws.get((t, p))) for g, t, p, o in committed]
    return sorted(out, key=lambda p: (p.group, p.topic, p.partition))
