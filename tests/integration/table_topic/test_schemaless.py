"""Schemaless topics (raw and string) become tables with Kafka metadata columns."""

from __future__ import annotations

import json

import pyarrow as pa

from tests.integration.table_topic.conftest import TableTopics


def test_string_topic_rows_values_and_metadata(tt: TableTopics) -> None:
    tt.create_topic(
        "plain-strings",
        partitions=2,
        **{"table.topic.convert.value.type": "string", "table.topic.convert.key.type": "string"},
    )
    recs = [(f"k{i}".encode(), f"value {i}".encode()) for i in range(200)]
    tt.produce("plain-strings", recs[:100], partition=0, headers=[("h", b"1")])
    tt.produce("plain-strings", recs[100:], partition=1)
    rows = tt.wait_rows("plain-strings", 200)
    assert rows.num_rows == 200
    assert rows.schema.field("value").type in (pa.string(), pa.large_string())
    by_key = {r["key"]: r for r in rows.to_pylist()}
    assert set(by_key) == {f"k{i}" for i in range(200)}
    assert by_key["k5"]["value"] == "value 5"
    assert by_key["k5"]["_kafka_partition"] == 0 and by_key["k5"]["_kafka_offset"] == 5
    assert by_key["k150"]["_kafka_partition"] == 1 and by_key["k150"]["_kafka_offset"] == 50
    assert by_key["k5"]["_kafka_headers"] == [{"key": "h", "value": b"1"}]
    assert by_key["k5"]["_kafka_key"] == b"k5"
    snap = tt.table("plain-strings").current_snapshot()
    assert snap is not None
    offsets = json.loads(snap.summary.additional_properties["tidelake.offsets"])
    assert offsets == {"0": 100, "1": 100}


def test_raw_topic_keeps_bytes_and_aliases_work(tt: TableTopics) -> None:
    tt.admin.create_topics  # noqa: B018 - the helper below sets Tidelake names; here AutoMQ's
    from confluent_kafka.admin import NewTopic

    cfg = {"automq.table.topic.enable": "true", "automq.table.topic.commit.interval.ms": "1000"}
    for f in tt.admin.create_topics([NewTopic("raw-bytes", 1, 1, config=cfg)]).values():
        f.result(30)
    payloads = [bytes([i % 256]) * (i % 7) for i in range(50)] + [None]
    tt.produce("raw-bytes", [(None, p) for p in payloads])
    rows = tt.wait_rows("raw-bytes", len(payloads))
    got = sorted(rows.to_pylist(), key=lambda r: r["_kafka_offset"])
    assert [r["value"] for r in got] == payloads
    assert all(r["_kafka_key"] is None for r in got)


def test_enabling_a_topic_with_data_converts_from_the_earliest_offset(tt: TableTopics) -> None:
    from confluent_kafka.admin import NewTopic

    for f in tt.admin.create_topics([NewTopic("late-enable", 1, 1)]).values():
        f.result(30)
    tt.produce("late-enable", [(None, f"v{i}".encode()) for i in range(30)])
    tt.alter(
        "late-enable",
        **{
            "table.topic.enable": "true",
            "table.topic.convert.value.type": "string",
            "table.topic.commit.interval.ms": "1000",
        },
    )
    rows = tt.wait_rows("late-enable", 30)
    assert sorted(rows.column("_kafka_offset").to_pylist()) == list(range(30))
