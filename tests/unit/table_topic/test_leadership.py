"""The coordinator follows the partitions this broker serves (a cluster's leader moves).

A real TableTopicService over an in-memory log manager and a SQLite catalog;
``close_partition`` / ``open_partition`` are what a cluster calls when this
broker loses or gains a partition's leadership.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from ingest.log.manager import LogManager
from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.records import build_batch
from ingest.s3stream import MemoryStreamEngine
from table_topic.commit import TableWriter, committed_offsets
from table_topic.config import TableTopicConfig
from table_topic.service import TableTopicService, TableTopicSettings, register_table_topic_configs
from tests.unit.table_topic.test_commit import rows

CONFIGS = {
    "table.topic.enable": "true",
    "table.topic.convert.value.type": "string",
    "table.topic.commit.interval.ms": "1000",
}


class Harness:
    def __init__(self, logs: LogManager, service: TableTopicService, catalog: SqlCatalog) -> None:
        self.logs = logs
        self.service = service
        self.catalog = catalog

    async def append(self, plog: PartitionLog, values: list[bytes | None]) -> None:
        now = int(time.time() * 1000)
        out = plog.append(build_batch([(None, v, [], now) for v in values]))
        assert out.durable is not None, out
        await out.durable

    def log(self, topic: str, partition: int) -> PartitionLog:
        plog = self.logs.partition(topic, partition)
        assert plog is not None
        return plog

    def table(self, name: str) -> pa.Table:
        return self.catalog.load_table(("default", name)).scan().to_arrow()

    def offsets(self, name: str) -> dict[int, int] | None:
        return committed_offsets(self.catalog.load_table(("default", name)))

    def status(self, topic: str) -> dict[str, Any]:
        found = [s for s in self.service.status() if s["topic"] == topic]
        assert found, f"no status for {topic}"
        return found[0]


async def wait_for(cond: Callable[[], bool], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await asyncio.to_thread(cond):
                return
        except Exception:  # the table does not exist yet
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    engine = MemoryStreamEngine()
    await engine.start()
    settings = TableTopicSettings(default_commit_interval_ms=1000, retry_backoff_ms=100)
    logs = LogManager(MemoryMetadataStore(), engine, TopicConfigRegistry.default())
    register_table_topic_configs(logs.configs, settings)
    catalog = SqlCatalog(
        "tidelake", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri()
    )
    service = TableTopicService(settings, logs, None, catalog)
    logs.listeners.append(service)
    await service.start()
    try:
        yield Harness(logs, service, catalog)
    finally:
        await service.stop()
        await engine.close()


def _pairs(t: pa.Table) -> Counter[tuple[int, int]]:
    return Counter(
        zip(
            t.column("_kafka_partition").to_pylist(),
            t.column("_kafka_offset").to_pylist(),
            strict=True,
        )
    )


async def test_a_partition_that_moves_away_and_back_is_converted_once(h: Harness) -> None:
    await h.logs.create_topic("moves", 2, 1, CONFIGS)
    p0, p1 = h.log("moves", 0), h.log("moves", 1)
    await h.append(p0, [b"a", b"b", b"c"])
    await h.append(p1, [b"x", b"y"])
    await wait_for(lambda: h.offsets("moves") == {0: 3, 1: 2})

    # this broker loses partition 1; its next records are converted by its new leader
    await h.logs.close_partition("moves", 1)
    await h.append(p1, [b"z0", b"z1", b"z2"])  # offsets 2-4, written through the new leader
    await h.append(p0, [b"d", b"e"])
    await wait_for(lambda: h.offsets("moves") == {0: 5, 1: 2})
    assert h.status("moves")["committed_offsets"] == {0: 5}  # it serves only partition 0
    topic = h.logs.get("moves")
    assert topic is not None and topic.config is not None
    other = TableWriter(
        h.catalog, TableTopicConfig.from_topic_config("moves", topic.config), 1 << 20
    )
    assert other.offsets_for([1]) == {1: 2}
    await asyncio.to_thread(
        other.commit,
        [rows([2, 3], {"value": pa.array(["z0", "z1"])}, partition=1)],
        {1: 4},
    )

    # partition 1 comes back: its worker starts from the table's offset (4), not from 2
    await h.logs.open_partition("moves", 1, leader_epoch=2)
    await wait_for(lambda: h.offsets("moves") == {0: 5, 1: 5})
    pairs = _pairs(h.table("moves"))
    assert set(pairs) == {(0, o) for o in range(5)} | {(1, o) for o in range(5)}
    assert max(pairs.values()) == 1, "a record was converted twice"


async def test_a_partition_that_left_is_not_committed_by_its_old_leader(h: Harness) -> None:
    """Rows converted for a partition that moved away before the commit are dropped:
    the table keeps its offset for the new leader."""
    await h.logs.create_topic(
        "leaves", 2, 1, {**CONFIGS, "table.topic.commit.interval.ms": "60000"}
    )
    p0, p1 = h.log("leaves", 0), h.log("leaves", 1)
    await h.append(p0, [b"a"])
    await h.append(p1, [b"x", b"y"])
    await wait_for(lambda: h.status("leaves")["state"] == "running")
    await asyncio.sleep(0.5)  # converted and pending; the commit interval is a minute
    await h.logs.close_partition("leaves", 1)  # the move commits partition 0 at once
    await wait_for(lambda: h.offsets("leaves") == {0: 1})
    assert set(_pairs(h.table("leaves"))) == {(0, 0)}


async def test_dead_letters_wait_until_this_broker_leads_a_dead_letter_partition(
    h: Harness,
) -> None:
    await h.logs.create_topic("src.dlq", 1, 1, {})
    await h.logs.close_partition("src.dlq", 0)  # another broker leads it
    await h.logs.create_topic("src", 1, 1, CONFIGS)
    await h.append(h.log("src", 0), [b"good", b"\xff\xfe", b"fine"])
    await wait_for(lambda: "leads none" in (h.status("src")["last_error"] or ""))
    if h.catalog.table_exists(("default", "src")):  # nothing moved past the bad record
        assert (h.offsets("src") or {}).get(0, 0) <= 1

    await h.logs.open_partition("src.dlq", 0, leader_epoch=1)
    await wait_for(lambda: h.offsets("src") == {0: 3})
    assert sorted(h.table("src").column("value").to_pylist()) == ["fine", "good"]
    assert h.status("src")["dead_letters"] == 1
    assert h.log("src.dlq", 0).high_watermark == 1


@pytest.fixture
def h(harness: Harness) -> Harness:
    return harness


async def test_a_cluster_broker_follows_a_config_changed_on_another_broker(tmp_path: Path) -> None:
    """Another broker's AlterConfigs reaches this one as a refreshed topic record,
    with no listener call: the service notices it and converts its partitions."""
    engine = MemoryStreamEngine()
    await engine.start()
    settings = TableTopicSettings(default_commit_interval_ms=1000, retry_backoff_ms=100)
    logs = LogManager(MemoryMetadataStore(), engine, TopicConfigRegistry.default(), lazy=True)
    register_table_topic_configs(logs.configs, settings)
    catalog = SqlCatalog(
        "tidelake", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri()
    )
    service = TableTopicService(settings, logs, None, catalog)
    logs.listeners.append(service)
    await service.start()
    h = Harness(logs, service, catalog)
    try:
        await logs.create_topic("late", 2, 1, {})
        plog = await logs.open_partition("late", 1, leader_epoch=0)  # this broker leads 1 only
        await h.append(plog, [b"a", b"b"])
        topic = logs.get("late")
        assert topic is not None
        # what LogManager.refresh does with a record another broker altered
        topic.config = logs.configs.resolved(logs.configs.validate(CONFIGS))
        await wait_for(lambda: h.offsets("late") == {1: 2})
        assert set(_pairs(h.table("late"))) == {(1, 0), (1, 1)}
    finally:
        await service.stop()
        await engine.close()
