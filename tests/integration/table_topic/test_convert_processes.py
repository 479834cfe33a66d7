"""Table topics converting in worker processes
(TIDELAKE_TABLE_TOPIC_CONVERT_PROCESSES): the same rows as in threads, schema
lookups answered through the parent, and the workers really run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.support.platform import TidelakeProcess

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "page", "type": "string"},
        {"name": "ms", "type": ["null", "double"], "default": None},
    ],
}
SCHEMA_V2 = {
    **SCHEMA,
    "fields": [*SCHEMA["fields"], {"name": "ref", "type": ["null", "string"], "default": None}],
}


@pytest.fixture(scope="module")
def tt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableTopics]:
    env = {**TT_ENV, "TIDELAKE_TABLE_TOPIC_CONVERT_PROCESSES": "2"}
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("procs")) / "data", env=env)
    proc.start()
    try:
        yield TableTopics(proc)
    finally:
        proc.stop()


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:  # the parent pid
                out.append(int(entry))
    return out


def test_avro_records_become_rows_in_worker_processes(tt: TableTopics) -> None:
    topic = "proc-clicks"
    tt.create_topic(
        topic,
        partitions=2,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        },
    )
    registry = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(registry, json.dumps(SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [
        (None, ser({"id": i, "page": f"/p/{i % 7}", "ms": i / 4 if i % 3 else None}, ctx))
        for i in range(3000)
    ]
    tt.produce(topic, records[:1500], partition=0)
    tt.produce(topic, records[1500:], partition=1)
    rows = tt.wait_rows(topic, 3000, timeout=60)
    got = {r["id"]: r for r in rows.to_pylist()}
    assert sorted(got) == list(range(3000))
    assert got[10]["page"] == "/p/3" and got[10]["ms"] == 2.5 and got[9]["ms"] is None
    # a new schema version mid-stream: the workers ask the parent for it
    ser2 = AvroSerializer(registry, json.dumps(SCHEMA_V2))
    tt.produce(topic, [(None, ser2({"id": 5000, "page": "/x", "ms": None, "ref": "ad"}, ctx))])
    rows = tt.wait_rows(topic, 3001, timeout=60)
    assert {r["id"]: r for r in rows.to_pylist()}[5000]["ref"] == "ad"
    assert tt.proc.proc is not None
    # the spawned pool's workers are the platform's children (and their own
    # children, the resource tracker aside)
    assert len(_children(tt.proc.proc.pid)) >= 2
    assert "convert in 2 worker processes" in tt.proc.log_path.read_text()
