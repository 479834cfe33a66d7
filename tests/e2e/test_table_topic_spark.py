"""From a Kafka producer to a Spark query: Avro table topics and upserts, read by
Spark 3.5 with Iceberg 1.10 and by pyiceberg, with the same rows, values and types."""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from catalog.config import CatalogSettings
from spark.jobs.rewrite import rewrite_position_delete_files
from tests.integration.spark.conftest import start_spark
from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.support.platform import TidelakeProcess

pytestmark = pytest.mark.spark

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "qty", "type": "int"},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "paid", "type": "boolean"},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
ROW = {
    "type": "record",
    "name": "Row",
    "namespace": "kv",
    "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("e2e-spark")) / "data", env=dict(TT_ENV))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def spark(served: TidelakeProcess) -> Iterator[Any]:
    session = start_spark(CatalogSettings(data_dir=served.data_dir))
    yield session
    session.stop()


def _orders(n: int) -> list[dict[str, Any]]:
    base = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    return [
        {
            "id": i,
            "customer": f"c{i % 13}",
            "qty": i % 7,
            "price": Decimal(f"{i}.{i % 100:02d}"),
            "paid": i % 2 == 0,
            "placed": base + datetime.timedelta(minutes=i),
            "note": None if i % 3 else f"note {i}",
            "tags": [f"t{j}" for j in range(i % 3)],
        }
        for i in range(n)
    ]


def test_avro_topic_reads_the_same_in_spark_and_pyiceberg(
    served: TidelakeProcess, spark: Any
) -> None:
    tt = TableTopics(served)
    topic = "orders"
    tt.create_topic(
        topic,
        partitions=3,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
        },
    )
    sr = SchemaRegistryClient({"url": served.registry_url})
    ser = AvroSerializer(sr, json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = _orders(300)
    tt.produce(topic, [(str(o["id"]).encode(), ser(o, ctx)) for o in orders])
    arrow = tt.wait_rows(topic, len(orders), timeout=60)
    assert arrow.num_rows == len(orders)

    types = dict(
        spark.sql(f"DESCRIBE TABLE tidelake.default.{topic}")
        .select("col_name", "data_type")
        .collect()
    )
    assert types["id"] == "bigint" and types["qty"] == "int" and types["paid"] == "boolean"
    assert types["price"] == "decimal(10,2)" and types["customer"] == "string"
    assert types["placed"].startswith("timestamp") and types["tags"] == "array<string>"
    assert types["_kafka_offset"] == "bigint" and types["_kafka_partition"] == "int"

    rows = spark.sql(
        f"SELECT id, customer, qty, price, paid, placed, note, tags FROM tidelake.default.{topic} ORDER BY id"
    ).collect()
    assert len(rows) == len(orders)
    for row, o in zip(rows, orders, strict=True):
        assert (row.id, row.customer, row.qty, row.price, row.paid, row.note, list(row.tags)) == (
            o["id"],
            o["customer"],
            o["qty"],
            o["price"],
            o["paid"],
            o["note"],
            o["tags"],
        )
        # Spark hands timestamps back as naive datetimes in the session time zone
        assert row.placed.timestamp() == o["placed"].timestamp()
    # pyiceberg sees the same values
    py = {r["id"]: r for r in arrow.select(["id", "customer", "price", "tags"]).to_pylist()}
    assert all(
        py[o["id"]]["price"] == o["price"] and py[o["id"]]["tags"] == o["tags"] for o in orders
    )
    # every (partition, offset) exactly once
    dupes = spark.sql(
        f"SELECT _kafka_partition, _kafka_offset, count(*) c FROM tidelake.default.{topic} "
        "GROUP BY 1, 2 HAVING c > 1"
    ).count()
    assert dupes == 0


def test_upserted_table_reads_the_latest_row_per_id_in_spark(
    served: TidelakeProcess, spark: Any
) -> None:
    tt = TableTopics(served)
    topic = "accounts"
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
    ser = AvroSerializer(SchemaRegistryClient({"url": served.registry_url}), json.dumps(ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(11)
    ref: dict[int, str] = {}
    for wave in range(3):
        batch = []
        for n in range(120):
            i = rnd.randrange(40)
            ref[i] = f"w{wave}-{n}"
            batch.append((str(i).encode(), ser({"id": i, "v": ref[i]}, ctx)))
        tt.produce(topic, batch)
        _wait_for_reference(tt, topic, ref)
    got = {r.id: r.v for r in spark.sql(f"SELECT id, v FROM tidelake.default.{topic}").collect()}
    assert got == ref
    assert spark.sql(f"SELECT count(*) c FROM tidelake.default.{topic}").collect()[0].c == len(ref)
    # merge-on-read: the replaced rows are hidden by position delete files, which Spark applies
    kinds = {
        r.content: r.n
        for r in spark.sql(
            f"SELECT content, count(*) n FROM tidelake.default.{topic}.all_delete_files GROUP BY 1"
        ).collect()
    }
    assert kinds.get(1, 0) >= 2 and 2 not in kinds  # position deletes only, one file per commit+


CDC_ROW = {
    "type": "record",
    "name": "Change",
    "namespace": "kv",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "v", "type": "string"},
        {"name": "op", "type": "string"},
    ],
}


def test_cdc_table_with_deletes_reads_the_reference_in_spark(
    served: TidelakeProcess, spark: Any
) -> None:
    tt = TableTopics(served)
    topic = "changes"
    tt.create_topic(
        topic,
        partitions=2,
        **{
            "table.topic.convert.value.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.id.columns": "id",
            "table.topic.cdc.field": "op",
            "table.topic.partition.by": "[bucket(id, 4)]",
        },
    )
    ser = AvroSerializer(SchemaRegistryClient({"url": served.registry_url}), json.dumps(CDC_ROW))
    ctx = SerializationContext(topic, MessageField.VALUE)
    rnd = random.Random(5)
    ref: dict[int, str] = {}
    for wave in range(3):
        batch = []
        for n in range(150):
            i = rnd.randrange(50)
            if i in ref and rnd.random() < 0.35:
                op = "d"
                ref.pop(i)
            else:
                op = "u" if i in ref else "c"
                ref[i] = f"w{wave}-{n}"
            # the key picks the partition: all changes of one id stay in order
            batch.append((str(i).encode(), ser({"id": i, "v": ref.get(i, "-"), "op": op}, ctx)))
        tt.produce(topic, batch)
        _wait_for_reference(tt, topic, ref)
    got = {r.id: r.v for r in spark.sql(f"SELECT id, v FROM tidelake.default.{topic}").collect()}
    assert got == ref
    deletes = spark.sql(
        f"SELECT count(*) c FROM tidelake.default.{topic}.delete_files WHERE content = 1"
    ).collect()[0].c
    assert deletes > 0
    # Spark maintenance takes our delete files: the delete rewrite job (which, for a
    # table with a list column, applies them to the data) leaves the reference rows and
    # no delete file behind
    r = rewrite_position_delete_files(
        spark, "tidelake", f"default.{topic}", options={"rewrite-all": "true"}
    )
    assert r.metrics["rewritten_data_files_count"] > 0
    spark.sql(f"REFRESH TABLE tidelake.default.{topic}")
    got = {r.id: r.v for r in spark.sql(f"SELECT id, v FROM tidelake.default.{topic}").collect()}
    assert got == ref
    left = spark.sql(f"SELECT count(*) c FROM tidelake.default.{topic}.delete_files").collect()[0].c
    assert left == 0
    assert _as_map(tt.table(topic).scan().to_arrow()) == ref


def _wait_for_reference(tt: TableTopics, topic: str, ref: dict[int, str]) -> None:
    """Until pyiceberg reads exactly ``ref`` (id -> v, one row per id) from the table."""
    tt.wait_rows(
        topic,
        len(ref),
        timeout=40,
        check=lambda t: (
            t.num_rows == len(ref)
            and dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
            == ref
        ),
    )


def _as_map(t: Any) -> dict[int, str]:
    ids = t.column("id").to_pylist()
    assert len(ids) == len(set(ids))
    return dict(zip(ids, t.column("v").to_pylist(), strict=True))
