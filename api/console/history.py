"""Series over time kept in memory by the API process: a ring buffer sampled
every few seconds (consumer group lag, table freshness and rows/s, bytes in/s)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from api.console.models import History, HistorySample
from api.metrics.lag import group_lags

if TYPE_CHECKING:
    from api.cluster_reads import ClusterReads
    from ingest.broker import Broker

__all__ = ["HistorySampler"]

log = logging.getLogger(__name__)


def _rates(now: dict[str, int], before: dict[str, int], span: float) -> dict[str, float]:
    """Per second growth of each counter (topics that appeared meanwhile: 0)."""
    return {name: round(max(0, n - before.get(name, n)) / span, 1) for name, n in now.items()}


class HistorySampler:
    def __init__(
        self,
        broker: Broker,
        reads: ClusterReads,
        table_status: Callable[[], list[dict[str, Any]]] | None,
        interval_s: float = 5.0,
        keep: int = 720,  # an hour at 5 s
    ) -> None:
        self._broker = broker
        self._reads = reads
        self._table_status = table_status
        self.interval_s = interval_s
        self.samples: deque[HistorySample] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None
        self._last: tuple[float, dict[str, int], dict[str, int]] | None = None
        self.topic_bytes_in_per_s: dict[str, float] = {}
        self.topic_messages_per_s: dict[str, float] = {}

    async def _end_offsets(self) -> dict[str, int]:
        """Each topic's high watermarks summed over all its partitions (in a
        cluster, asked of their leaders; one that does not answer counts as
        unchanged)."""
        topics = self._broker.logs.topics
        hws = await self._reads.high_watermarks(
            [(name, p) for name, t in topics.items() for p in range(t.partition_count)]
        )
        before = self._last[2] if self._last is not None else {}
        out: dict[str, int] = {}
        for name, t in topics.items():
            known = [hws.get((name, p)) for p in range(t.partition_count)]
            if None in known and name in before:
                out[name] = before[name]
            else:
                out[name] = sum(hw for hw in known if hw is not None)
        return out

    def _appended_bytes(self) -> dict[str, int]:
        return {
            name: sum(plog.appended_bytes for plog in topic.logs.values())
            for name, topic in self._broker.logs.topics.items()
        }

    async def sample(self) -> HistorySample:
        now = time.monotonic()
        appended = self._appended_bytes()
        ends = await self._end_offsets()
        rates: dict[str, float] = {}
        if self._last is not None and now > self._last[0]:
            span = now - self._last[0]
            rates = _rates(appended, self._last[1], span)
            self.topic_messages_per_s = _rates(ends, self._last[2], span)
        self._last = (now, appended, ends)
        self.topic_bytes_in_per_s = rates
        rate = sum(rates.values())
        lag: dict[str, int] = {}
        # every group of the cluster: a group's page on any broker has its chart
        listing = await self._reads.list_groups()
        names = [g.group_id for g in listing.groups]
        for p in await group_lags(self._broker, self._reads, names):
            if p.lag is not None:
                lag[p.group] = lag.get(p.group, 0) + p.lag
        rows = self._table_status() if self._table_status is not None else []
        s = HistorySample(
            at_ms=int(time.time() * 1000),
            bytes_in_per_s=round(rate, 1),
            group_lag=lag,
            table_freshness_ms={str(r["topic"]): r.get("freshness_ms") for r in rows},
            table_rows_per_second={
                str(r["topic"]): float(r.get("rows_per_second") or 0) for r in rows
            },
        )
        self.samples.append(s)
        return s

    def history(self) -> History:
        return History(interval_s=self.interval_s, samples=list(self.samples))

    @property
    def bytes_in_per_s(self) -> float:
        return self.samples[-1].bytes_in_per_s if self.samples else 0.0

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception as exc:  # noqa: BLE001 - a gap in the series, not a crash
                log.warning("console history sample failed: %s", exc)
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="console-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
