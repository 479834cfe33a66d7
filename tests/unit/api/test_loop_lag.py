"""The event loop lag monitor and the storage histograms on /metrics."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from api.metrics.collectors import StorageCollector
from api.metrics.loop import LoopLagMonitor
from ingest.s3stream.latency import LatencyHistogram


def test_a_blocked_loop_shows_as_lag() -> None:
    registry = CollectorRegistry()
    monitor = LoopLagMonitor(registry, interval_s=0.005)

    def hold() -> None:  # a callback that holds the loop for 60 ms
        time.sleep(0.06)

    async def run() -> None:
        monitor.start()
        await asyncio.sleep(0.05)  # some quiet ticks
        asyncio.get_running_loop().call_soon(hold)
        await asyncio.sleep(0.09)
        await monitor.stop()

    asyncio.run(run())
    count = registry.get_sample_value("tidelake_event_loop_lag_seconds_count")
    assert count is not None and count >= 3
    # the tick due during the 60 ms stall ran at least ~55 ms late
    worst = registry.get_sample_value("tidelake_event_loop_lag_max_seconds")
    assert worst is not None and 0.05 <= worst < 1.0
    below_25ms = registry.get_sample_value("tidelake_event_loop_lag_seconds_bucket", {"le": "0.025"})
    assert below_25ms is not None and below_25ms == count - 1


def test_storage_latency_histograms_are_exposed_with_cumulative_buckets() -> None:
    append, sync = LatencyHistogram(), LatencyHistogram()
    for s in (0.0002, 0.0004, 0.004):
        append.observe(s)
    sync.observe(0.0003)
    engine = SimpleNamespace(
        uploads=0, uploaded_bytes=0, wal_append_latency=append, wal_sync_latency=sync
    )
    registry = CollectorRegistry()
    registry.register(StorageCollector(engine))

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("tidelake_storage_wal_append_seconds_count") == 3
    assert sample("tidelake_storage_wal_append_seconds_bucket", le="0.00025") == 1
    assert sample("tidelake_storage_wal_append_seconds_bucket", le="0.0005") == 2
    assert sample("tidelake_storage_wal_append_seconds_bucket", le="0.005") == 3
    assert sample("tidelake_storage_wal_append_seconds_sum") == sum((0.0002, 0.0004, 0.004))
    assert sample("tidelake_storage_wal_sync_seconds_bucket", le="+Inf") == 1
