"""A running platform with data a console user looks at: a topic with Avro
records and text keys, a table topic, a consumer group with lag, a subject
with two schema versions. Shared by the console tests and the screenshot script."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from typing import Any

import fastavro
import httpx
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.platform import TidelakeProcess

__all__ = ["SampleData", "load_sample_data", "ORDER_V1", "ORDER_V2"]

ORDER_V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}],
}
ORDER_V2: dict[str, Any] = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int", "default": 1}],
}
ITEMS = ["tea", "cake", "scone", "jam", "bread", "honey"]


@dataclass
class SampleData:
    platform: TidelakeProcess
    schema_ids: list[int]
    first_timestamps: dict[int, int]  # partition -> timestamp of its record 3 (ms)
    consumer: Consumer | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


def _register(platform: TidelakeProcess, subject: str, schema: dict[str, Any]) -> int:
    r = httpx.post(
        f"{platform.registry_url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        timeout=10,
    )
    r.raise_for_status()
    return int(r.json()["id"])


def _avro(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue()


def load_sample_data(platform: TidelakeProcess, orders: int = 12, clicks: int = 40) -> SampleData:
    """Fill ``platform``; returns when the table topics have committed every click
    and shipment (one shipment dead-lettered) and the group ``billing`` has a
    member and committed offsets 2 behind per partition."""
    admin = AdminClient({"bootstrap.servers": platform.bootstrap, "log_level": 0})
    futures = admin.create_topics(
        [
            NewTopic("orders", 2, 1, config={"retention.ms": "86400000"}),
            NewTopic("ledger", 1, 1),
            NewTopic(
                "shipments",
                1,
                1,
                config={
                    "table.topic.enable": "true",
                    "table.topic.commit.interval.ms": "1000",
                    "table.topic.convert.value.type": "by_schema_id",
                },
            ),
            NewTopic(
                "clicks",
                1,
                1,
                config={
                    "table.topic.enable": "true",
                    "table.topic.commit.interval.ms": "1000",
                    "table.topic.convert.value.type": "string",
                    "table.topic.format": "both",  # an Iceberg and a Delta table
                },
            ),
        ]
    )
    for f in futures.values():
        f.result(15)
    ids = [
        _register(platform, "orders-value", ORDER_V1),
        _register(platform, "orders-value", ORDER_V2),
    ]
    producer = Producer({"bootstrap.servers": platform.bootstrap, "acks": "all", "log_level": 0})
    stamps: dict[int, int] = {}
    base = int(time.time() * 1000) - 60_000
    for i in range(orders):
        partition = i % 2
        ts = base + i * 1000
        if i // 2 == 3:
            stamps[partition] = ts
        producer.produce(
            "orders",
            key=f"order-{i}".encode(),
            value=_avro(ids[1], ORDER_V2, {"id": i, "item": ITEMS[i % len(ITEMS)], "qty": i + 1}),
            partition=partition,
            timestamp=ts,
            headers=[("source", b"console-test")],
        )
    for i in range(clicks):
        producer.produce("clicks", key=f"user-{i % 5}".encode(), value=f"click {i}".encode())
    for i in range(2):  # two Avro shipments and one that is not: a dead letter
        value = _avro(ids[1], ORDER_V2, {"id": i, "item": "tea", "qty": 1})
        producer.produce("shipments", key=f"ship-{i}".encode(), value=value)
    producer.produce("shipments", key=b"ship-bad", value=b"not avro at all")
    assert producer.flush(30) == 0
    transactional = Producer(
        {"bootstrap.servers": platform.bootstrap, "transactional.id": "ledger-tx", "log_level": 0}
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for i in range(3):
        transactional.produce("ledger", key=f"entry-{i}".encode(), value=f"credit {i}".encode())
    transactional.commit_transaction(30)  # a commit marker follows the 3 records

    consumer = Consumer(
        {
            "bootstrap.servers": platform.bootstrap,
            "group.id": "billing",
            "client.id": "billing-app",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    consumer.subscribe(["orders"])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    per_partition = orders // 2
    consumer.commit(
        offsets=[TopicPartition("orders", p, per_partition - 2) for p in (0, 1)],
        asynchronous=False,
    )
    data = SampleData(platform, ids, stamps, consumer)
    wanted = {"clicks": (clicks, 0), "shipments": (2, 1)}  # rows, dead letters
    got: dict[str, tuple[int, int]] = {}
    while time.monotonic() < deadline:
        rows = httpx.get(f"{platform.http_url}/api/v1/table-topics", timeout=10).json()
        got = {r["topic"]: (r["rows_committed"], r["dead_letters"]) for r in rows if r["lag"] == 0}
        if all(got.get(t) == w for t, w in wanted.items()):
            return data
        consumer.poll(0.2)
    data.close()
    raise TimeoutError(f"the table topics did not commit {wanted}: {got}")
