"""Table topics written as Delta Lake tables (``table.topic.format=delta|both``): read
back with deltalake and polars, compared with the Iceberg copy of the same topic."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from confluent_kafka.admin import ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable
from pyiceberg.exceptions import NoSuchTableError

from tests.integration.table_topic.conftest import TableTopics
from tests.integration.table_topic.test_avro import ORDER_V1, _order, _v2
from tests.integration.table_topic.test_json_protobuf import JSON_SCHEMA
from tests.integration.table_topic.test_upsert_cdc import ROW

AVRO = {
    "table.topic.convert.value.type": "by_schema_id",
    "table.topic.transform.value.type": "flatten",
}


def delta_path(tt: TableTopics, topic: str, namespace: str = "default") -> Path:
    name = topic.replace(".", "_").replace("-", "_")
    return tt.proc.data_dir.resolve() / "warehouse" / "delta" / namespace / name


def wait_delta(
    tt: TableTopics, topic: str, count: int, check: Callable[[pa.Table], bool] | None = None
) -> pa.Table:
    deadline = time.monotonic() + 40
    last = None
    while time.monotonic() < deadline:
        path = delta_path(tt, topic)
        if (path / "_delta_log").exists():
            last = DeltaTable(str(path)).to_pyarrow_table()
            if last.num_rows >= count and (check is None or check(last)):
                return last
        time.sleep(0.3)
    have = None if last is None else last.num_rows
    raise AssertionError(f"{topic}: wanted {count} Delta rows, have {have}\n{tt.proc.log_tail()}")


def keyed(t: pa.Table, *cols: str) -> list[tuple[object, ...]]:
    return sorted(
        zip(
            *(t.column(c).to_pylist() for c in ("_kafka_partition", "_kafka_offset", *cols)),
            strict=True,
        )
    )


def test_avro_into_both_gives_the_same_rows_in_delta_and_iceberg_through_evolution(
    tt: TableTopics,
) -> None:
    topic = "delta-both-orders"
    tt.create_topic(topic, partitions=2, **AVRO, **{"table.topic.format": "both"})
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    sr.set_compatibility(subject_name=f"{topic}-value", level="NONE")
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser1 = AvroSerializer(sr, json.dumps(ORDER_V1))
    tt.produce(topic, [(str(i).encode(), ser1(_order(i), ctx)) for i in range(60)])
    ser2 = AvroSerializer(sr, json.dumps(_v2()))
    tt.produce(topic, [(str(i).encode(), ser2(_order(i, 2), ctx)) for i in range(60, 90)])

    iceberg = tt.wait_rows(topic, 90)
    delta = wait_delta(tt, topic, 90)
    assert delta.num_rows == 90
    assert keyed(delta, "id", "name") == keyed(iceberg, "id", "name")
    # evolution as the Iceberg path does it: new column, nested addition, widening
    schema = delta.schema
    assert schema.field("extra").type == pa.int64()
    assert schema.field("score").type == pa.float64()
    addr = schema.field("address").type
    assert addr.field("zip").type == pa.int64() and addr.field("city").type == pa.string()
    by_id = {r["id"]: r for r in delta.to_pylist()}
    assert by_id[70]["extra"] == 700 and by_id[70]["address"]["city"] == "c70"
    assert by_id[7]["extra"] is None and by_id[7]["address"] == {
        "street": "s7",
        "zip": 1007,
        "city": None,
    }
    assert str(by_id[7]["amount"]) == "7.25" and by_id[7]["tags"] == ["t7", "x"]
    # polars reads the same table
    frame = pl.read_delta(str(delta_path(tt, topic)))
    assert frame.height == 90
    assert sorted(frame["id"].to_list()) == list(range(90))
    # every partition's next offset is in the table's txn actions
    ends = {p: max(o for q, o, *_ in keyed(delta) if q == p) + 1 for p in (0, 1)}
    apps = _app_versions(tt, topic)
    assert apps == ends


def _app_versions(tt: TableTopics, topic: str) -> dict[int, int]:
    """Each partition's txn version, read from the Delta log files themselves."""
    out: dict[int, int] = {}
    for f in sorted((delta_path(tt, topic) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                app = action["txn"]["appId"]
                out[int(app.rsplit(":", 1)[1])] = action["txn"]["version"]
    return out


def test_json_into_delta_only_writes_no_iceberg_table(tt: TableTopics) -> None:
    topic = "delta-json-readings"
    tt.create_topic(topic, **AVRO, **{"table.topic.format": "delta"})
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = JSONSerializer(json.dumps(JSON_SCHEMA), sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    recs = [
        {
            "sensor": f"s{i}",
            "value": i * 1.5,
            "count": i,
            "ok": i % 2 == 0,
            "at": f"2024-05-01T00:00:{i:02d}Z",
            "labels": ["a", str(i)],
            "pos": {"x": i, "y": -i},
        }
        for i in range(30)
    ]
    tt.produce(topic, [(None, ser(r, ctx)) for r in recs])
    wait_delta(tt, topic, 30)
    frame = pl.read_delta(str(delta_path(tt, topic))).sort("count")
    assert frame["sensor"].to_list() == [f"s{i}" for i in range(30)]
    assert frame["value"].to_list()[3] == 4.5
    assert frame["pos"].to_list()[3] == {"x": 3, "y": -3}
    assert frame["at"].dtype == pl.Datetime("us", "UTC")
    with pytest.raises(NoSuchTableError):
        tt.table(topic)


def test_upsert_and_cdc_deletes_land_alike_in_delta_and_iceberg(tt: TableTopics) -> None:
    topic = "delta-upsert-rows"
    tt.create_topic(
        topic,
        **AVRO,
        **{
            "table.topic.format": "both",
            "table.topic.id.columns": "id",
            "table.topic.upsert.enable": "true",
            "table.topic.cdc.field": "op",
        },
    )
    sr = SchemaRegistryClient({"url": tt.proc.registry_url})
    ser = AvroSerializer(sr, json.dumps(ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    ref: dict[int, str] = {}
    for wave in range(3):
        batch = []
        for i in range(40):
            op = "d" if wave == 2 and i % 3 == 0 else "u"
            v = f"w{wave}-{i}"
            if op == "d":
                ref.pop(i, None)
            else:
                ref[i] = v
            batch.append((str(i).encode(), ser({"id": i, "v": v, "op": op}, ctx)))
        tt.produce(topic, batch)

        def same(t: pa.Table) -> bool:
            return dict(zip(t["id"].to_pylist(), t["v"].to_pylist(), strict=True)) == ref and (
                t.num_rows == len(ref)
            )

        wait_delta(tt, topic, len(ref), check=same)
        tt.wait_rows(topic, len(ref), check=same)


def test_format_is_a_validated_topic_config_visible_in_describe_configs(tt: TableTopics) -> None:
    topic = "delta-config"
    tt.create_topic(topic, **{"table.topic.format": "delta"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = next(iter(tt.admin.describe_configs([res]).values())).result(30)
    assert configs["table.topic.format"].value == "delta"
    bad = tt.admin.create_topics(
        [NewTopic("delta-bad", 1, 1, config={"table.topic.format": "hudi"})]
    )
    with pytest.raises(Exception, match="hudi"):
        next(iter(bad.values())).result(30)


def _status(tt: TableTopics, topic: str, ready: Callable[[dict[str, object]], bool]) -> dict:  # type: ignore[type-arg]
    import httpx

    deadline = time.monotonic() + 30
    row: dict[str, object] = {}
    while time.monotonic() < deadline:
        rows = httpx.get(f"{tt.proc.http_url}/api/v1/table-topics", timeout=10).json()
        row = next((r for r in rows if r["topic"] == topic), {})
        if row and ready(row):
            return row
        time.sleep(0.3)
    raise AssertionError(f"{topic}: {row}")


def test_delta_partitions_by_day_and_refuses_bucket_with_a_visible_error(tt: TableTopics) -> None:
    topic = "delta-by-day"
    tt.create_topic(
        topic,
        **{
            "table.topic.format": "delta",
            "table.topic.convert.value.type": "string",
            "table.topic.partition.by": "[day(_kafka_timestamp)]",
        },
    )
    tt.produce(topic, [(None, f"v{i}".encode()) for i in range(10)])
    rows = wait_delta(tt, topic, 10)
    assert DeltaTable(str(delta_path(tt, topic))).metadata().partition_columns == [
        "_kafka_timestamp_day"
    ]
    days = {d.isoformat() for d in rows["_kafka_timestamp_day"].to_pylist()}
    stamps = {t.date().isoformat() for t in rows["_kafka_timestamp"].to_pylist()}
    assert days == stamps
    assert _status(tt, topic, lambda r: r["rows_committed"] == 10)["format"] == "delta"

    bad = "delta-by-bucket"
    tt.create_topic(
        bad,
        **{
            "table.topic.format": "delta",
            "table.topic.convert.value.type": "string",
            "table.topic.partition.by": "[bucket(_kafka_offset, 4)]",
        },
    )
    row = _status(tt, bad, lambda r: bool(r["last_error"]))
    assert "no Delta Lake equivalent" in str(row["last_error"]) and row["state"] == "error"
