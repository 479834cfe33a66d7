"""Upsert and CDC: a later row replaces the earlier one with the same id; deletes remove it."""

from __future__ import annotations

import json
import random

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.table_topic.conftest import TableTopics

ROW = {
    "type": "record",
    "name": "Row",
    "namespace": "cdc",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "v", "type": "string"},
        {"name": "op", "type": ["null", "string"], "default": None},
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbz",
    "fields": [
        {
            "name": "before",
            "type": ["null", {**ROW, "name": "Value", "namespace": "dbz"}],
            "default": None,
        },
        {"name": "after", "type": ["null", "dbz.Value"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}


def _rows(tt: TableTopics, topic: str) -> dict[int, str]:
    t = tt.table(topic).scan().to_arrow()
    ids = t.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id appears twice"
    return dict(zip(ids, t.column("v").to_pylist(), strict=True))


def _wait_equal(tt: TableTopics, topic: str, ref: dict[int, str]) -> None:
    tt.wait_rows(topic, len(ref), check=lambda t: _as_map(t) == ref, timeout=40)


def _as_map(t) -> dict[int, str] | None:  # type: ignore[no-untyped-def]
    ids = t.column("id").to_pylist()
    if len(ids) != len(set(ids)):
        return None
    return dict(zip(ids, t.column("v").to_pylist(), strict=True))


def test_upsert_keeps_the_last_row_per_id(tt: TableTopics) -> None:
    topic = "upsert-rows"
    tt.create_topic(
        topic,
        partitions=1,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.id.columns": "id",
            "table.topic.upsert.enable": "true",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(7)
    ref: dict[int, str] = {}
    for wave in range(3):
        batch = []
        for n in range(150):
            i = rnd.randrange(60)
            v = f"w{wave}-{n}"
            ref[i] = v
            batch.append((str(i).encode(), ser({"id": i, "v": v, "op": None}, ctx)))
        tt.produce(topic, batch)
        _wait_equal(tt, topic, ref)
    assert _rows(tt, topic) == ref


def test_cdc_field_inserts_updates_and_deletes(tt: TableTopics) -> None:
    topic = "cdc-rows"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.id.columns": "[id]",
            "table.topic.cdc.field": "op",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(11)
    ref: dict[int, str] = {}
    for wave in range(3):
        batch = []
        for n in range(120):
            i = rnd.randrange(40)
            op = "D" if i in ref and rnd.random() < 0.3 else ("U" if i in ref else "I")
            v = f"w{wave}-{n}"
            if op == "D":
                ref.pop(i, None)
            else:
                ref[i] = v
            batch.append((str(i).encode(), ser({"id": i, "v": v, "op": op}, ctx)))
        tt.produce(topic, batch)
        _wait_equal(tt, topic, ref)
    assert _rows(tt, topic) == ref


def test_debezium_envelope_after_image_and_deletes(tt: TableTopics) -> None:
    topic = "dbz-rows"
    tt.create_topic(
        topic,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten_debezium",
            "table.topic.id.columns": "id",
            "table.topic.upsert.enable": "true",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ENVELOPE))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(3)
    ref: dict[int, str] = {}
    for wave in range(2):
        batch = []
        for n in range(100):
            i = rnd.randrange(30)
            v = f"w{wave}-{n}"
            if i in ref and rnd.random() < 0.3:
                env = {"before": {"id": i, "v": ref.pop(i), "op": None}, "after": None, "op": "d"}
            elif i in ref:
                env = {
                    "before": {"id": i, "v": ref[i], "op": None},
                    "after": {"id": i, "v": v, "op": None},
                    "op": "u",
                }
                ref[i] = v
            else:
                env = {"before": None, "after": {"id": i, "v": v, "op": None}, "op": "c"}
                ref[i] = v
            batch.append((str(i).encode(), ser({**env, "ts_ms": n}, ctx)))
        tt.produce(topic, batch)
        _wait_equal(tt, topic, ref)
    t = tt.table(topic).scan().to_arrow()
    assert set(t.column("_cdc_op").to_pylist()) <= {"c", "u"}


def test_upsert_follows_offsets_not_timestamps_however_commits_fall(tt: TableTopics) -> None:
    # CreateTime goes backwards within each partition; the record with the higher
    # offset must win, in one commit and across many, so both tables end the same
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ROW))
    rnd = random.Random(11)
    waves: list[list[tuple[int, int, str]]] = []
    ts = 1_900_000_000_000
    for wave in range(3):
        recs = []
        for n in range(40):
            ts -= rnd.randrange(1, 1000)
            recs.append((rnd.randrange(12), ts, f"w{wave}-{n}"))
        waves.append(recs)
    ref: dict[int, str] = {}
    for recs in waves:
        ref.update({i: v for i, _, v in recs})
    finals = []
    for topic, in_waves in (("upsert-ts-once", False), ("upsert-ts-waves", True)):
        tt.create_topic(
            topic,
            partitions=2,
            **{
                "table.topic.convert.value.type": "by_schema_id",
                "table.topic.transform.value.type": "flatten",
                "table.topic.id.columns": "id",
                "table.topic.upsert.enable": "true",
            },
        )
        ctx = SerializationContext(topic, MessageField.VALUE)
        p = tt.producer()
        seen: dict[int, str] = {}
        for recs in waves:
            for i, stamp, v in recs:
                value = ser({"id": i, "v": v, "op": None}, ctx)
                # an id always goes to one partition, as a keyed producer sends it
                p.produce(topic, key=str(i).encode(), value=value, partition=i % 2, timestamp=stamp)
                seen[i] = v
            if in_waves:
                assert p.flush(30) == 0
                _wait_equal(tt, topic, dict(seen))
        assert p.flush(30) == 0
        _wait_equal(tt, topic, ref)
        finals.append(_rows(tt, topic))
    assert finals[0] == finals[1] == ref
