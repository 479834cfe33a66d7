"""A table topic with upsert on a compacted topic, as users of Kafka
changelogs expect: the table holds each key's latest row whether it reads
the log before or after the cleaner compacted it, and follows new updates."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.integration.table_topic.test_upsert_cdc import ROW, _rows, _wait_equal
from tests.support.platform import TidelakeProcess

ENV = {
    **TT_ENV,
    "TIDELAKE_BROKER_LOG_CLEANER_BACKOFF_MS": "300",
    "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": "200",
}
UPSERT = {
    "table.topic.convert.value.type": "by_schema_id",
    "table.topic.transform.value.type": "flatten",
    "table.topic.id.columns": "id",
    "table.topic.upsert.enable": "true",
}


@pytest.fixture(scope="module")
def tt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableTopics]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("compact-upsert")) / "data", env=ENV)
    proc.start()
    try:
        yield TableTopics(proc)
    finally:
        proc.stop()


def _objects_bytes(proc: TidelakeProcess) -> int:
    return sum(f.stat().st_size for f in (proc.data_dir / "objects").rglob("*") if f.is_file())


def test_a_changelog_table_holds_the_latest_row_per_key(tt: TableTopics) -> None:
    topic = "changelog"
    # the topic fills and is compacted before its table topic is turned on
    tt.admin.create_topics(
        [
            NewTopic(
                topic,
                1,
                1,
                config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
            )
        ]
    )[topic].result(30)
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(11)
    ref: dict[int, str] = {}

    def updates(wave: int, count: int) -> None:
        batch = []
        for n in range(count):
            i = rnd.randrange(40)
            ref[i] = f"w{wave}-{n}-" + "x" * 300
            batch.append((str(i).encode(), ser({"id": i, "v": ref[i], "op": None}, ctx)))
        tt.produce(topic, batch)

    updates(0, 1500)

    def cleaner_passes() -> float:
        text = httpx.get(f"{tt.proc.http_url}/metrics", timeout=10).text
        found = re.search(r"^tidelake_log_cleaner_passes_total (\S+)$", text, re.M)
        assert found is not None, "no cleaner metric"
        return float(found.group(1))

    # the cleaner compacts the log (its passes count, the objects shrink)
    # before the table topic is turned on
    produced = 1500 * 300  # at least: every value carries 300 bytes of padding
    deadline = time.monotonic() + 30
    while not (cleaner_passes() >= 1 and 0 < _objects_bytes(tt.proc) < produced // 4):
        assert time.monotonic() < deadline, (_objects_bytes(tt.proc), cleaner_passes())
        time.sleep(0.3)
    tt.alter(
        topic, **{"table.topic.enable": "true", "table.topic.commit.interval.ms": "1000", **UPSERT}
    )
    _wait_equal(tt, topic, ref)
    # and it follows new updates, compacted or not by the time it reads them
    updates(1, 600)
    _wait_equal(tt, topic, ref)
    assert _rows(tt, topic) == ref
