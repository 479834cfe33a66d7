"""The service inside one Platform (same process): status, errors.tolerance=none, partition spec changes,
by_latest_schema, schema-framed keys, snapshot expiry."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from api.process import Platform
from api.settings import load_settings
from ingest.protocol.records import build_batch
from tests.integration.table_topic.conftest import table_catalog

ROW = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}],
}


def avro(value: dict[str, Any], schema: dict[str, Any] = ROW) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


async def _start_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Platform:
    monkeypatch.setenv("TIDELAKE_TABLE_TOPIC_DEFAULT_COMMIT_INTERVAL_MS", "1000")
    monkeypatch.setenv("TIDELAKE_TABLE_TOPIC_RETRY_BACKOFF_MS", "200")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings(
        None,
        data_dir=str(tmp_path / "data"),
        kafka_listen="127.0.0.1:0",
        registry_listen="127.0.0.1:0",
        http_listen="127.0.0.1:0",
    )
    p = Platform(settings)
    await p.start()
    return p


@pytest.fixture
async def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Platform]:
    p = await _start_platform(tmp_path, monkeypatch)
    try:
        yield p
    finally:
        await p.stop()


async def append(
    p: Platform, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int = 0
) -> None:
    assert p.broker is not None
    t = p.broker.logs.get(topic)
    assert t is not None
    now = int(time.time() * 1000)
    out = t.partitions[partition].append(build_batch([(k, v, [], now) for k, v in records]))
    assert out.durable is not None, out
    await out.durable


async def wait_for(cond: Any, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await asyncio.to_thread(cond):
                return
        except Exception:  # e.g. the table does not exist yet
            pass
        await asyncio.sleep(0.2)
    raise AssertionError("condition not met in time")


def status_of(p: Platform, topic: str) -> dict[str, Any]:
    return next(s for s in p.table_topics.status() if s["topic"] == topic)


def register(p: Platform, subject: str, schema: dict[str, Any]) -> int:
    from schema_registry.service import SchemaRequest

    reg = p.table_topics.registry
    return int(reg.register(subject, SchemaRequest.from_json({"schema": json.dumps(schema)}))["id"])


async def test_status_reports_lag_freshness_rows_files_and_dead_letters(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    await p.broker.logs.create_topic(
        "st", 2, 1, {"table.topic.enable": "true", "table.topic.convert.value.type": "string"}
    )
    await append(p, "st", [(None, b"a"), (None, b"\xff\xfe"), (None, b"c")], 0)
    await append(p, "st", [(None, b"d")], 1)
    await wait_for(
        lambda: status_of(p, "st")["lag"] == 0 and status_of(p, "st")["rows_committed"] == 3
    )
    s = status_of(p, "st")
    assert s["state"] == "running" and s["enabled"]
    assert s["dead_letters"] == 1
    assert s["committed_offsets"] == {0: 3, 1: 1}
    assert s["freshness_ms"] is not None and 0 <= s["freshness_ms"] < 60_000
    assert s["files_per_commit"] is not None and s["last_error"] is None
    assert s["table"] == "default.st"


async def test_errors_tolerance_none_stops_at_the_bad_record(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    await p.broker.logs.create_topic(
        "strict",
        1,
        1,
        {
            "table.topic.enable": "true",
            "table.topic.convert.value.type": "string",
            "table.topic.errors.tolerance": "none",
        },
    )
    await append(p, "strict", [(None, b"ok1"), (None, b"ok2"), (None, b"\xff"), (None, b"ok3")])
    await wait_for(lambda: status_of(p, "strict")["state"] == "error")
    await wait_for(lambda: status_of(p, "strict")["committed_offsets"].get(0) == 2)
    s = status_of(p, "strict")
    assert "offset 2" in (s["last_error"] or "") and s["lag"] == 2
    catalog = table_catalog(Path(p.settings.data_dir))
    assert catalog.load_table(("default", "strict")).scan().to_arrow().num_rows == 2
    assert p.broker.logs.get("strict.dlq") is None


async def test_partition_by_change_evolves_the_spec(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    cfg = {
        "table.topic.enable": "true",
        "table.topic.convert.value.type": "string",
        "table.topic.partition.by": "[day(_kafka_timestamp)]",
    }
    await p.broker.logs.create_topic("parted", 1, 1, cfg)
    await append(p, "parted", [(b"k", b"v1")])
    catalog = table_catalog(Path(p.settings.data_dir))

    def spec() -> list[str]:
        try:
            t = catalog.load_table(("default", "parted"))
        except Exception:
            return []
        return sorted(str(f.transform) for f in t.spec().fields if str(f.transform) != "void")

    await wait_for(lambda: spec() == ["day"])
    await p.broker.logs.set_configs(
        "parted", {**cfg, "table.topic.partition.by": "[hour(_kafka_timestamp), bucket(value, 4)]"}
    )
    await append(p, "parted", [(b"k", b"v2")])
    await wait_for(lambda: spec() == ["bucket[4]", "hour"])
    await wait_for(
        lambda: catalog.load_table(("default", "parted")).scan().to_arrow().num_rows == 2
    )


async def test_by_latest_schema_and_schema_framed_keys(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    register(p, "latest-value", ROW)
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "tenant", "type": "string"}]}
    kid = register(p, "latest-key", key_schema)
    await p.broker.logs.create_topic(
        "latest",
        1,
        1,
        {
            "table.topic.enable": "true",
            "table.topic.convert.value.type": "by_latest_schema",
            "table.topic.convert.key.type": "by_schema_id",
            "table.topic.transform.value.type": "flatten",
            "table.topic.expire.snapshots.older.than.ms": "0",
        },
    )
    key = b"\x00" + struct.pack(">I", kid) + avro({"tenant": "t1"}, key_schema)
    for i in range(3):
        await append(p, "latest", [(key, avro({"id": i, "v": f"v{i}"}))])
        await asyncio.sleep(1.2)
    catalog = table_catalog(Path(p.settings.data_dir))
    await wait_for(
        lambda: catalog.load_table(("default", "latest")).scan().to_arrow().num_rows == 3
    )
    rows = catalog.load_table(("default", "latest")).scan().to_arrow().sort_by("id").to_pylist()
    assert [r["v"] for r in rows] == ["v0", "v1", "v2"]
    assert rows[0]["key"] == {"tenant": "t1"}
    # expiry keeps the newest snapshot only (older.than 0, retain.last 1)
    await wait_for(lambda: len(catalog.load_table(("default", "latest")).snapshots()) == 1)


async def test_added_partitions_are_converted(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    await p.broker.logs.create_topic(
        "grows", 1, 1, {"table.topic.enable": "true", "table.topic.convert.value.type": "string"}
    )
    await append(p, "grows", [(None, b"p0-a")], 0)
    await wait_for(lambda: status_of(p, "grows")["rows_committed"] == 1)
    await p.broker.logs.create_partitions("grows", 3)
    await append(p, "grows", [(None, b"p1-a")], 1)
    await append(p, "grows", [(None, b"p2-a"), (None, b"p2-b")], 2)
    catalog = table_catalog(Path(p.settings.data_dir))
    await wait_for(lambda: catalog.load_table(("default", "grows")).scan().to_arrow().num_rows == 4)
    assert status_of(p, "grows")["committed_offsets"] == {0: 1, 1: 1, 2: 2}


async def test_a_backlog_commits_in_bounded_chunks_without_waiting_for_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELAKE_TABLE_TOPIC_MAX_ROWS_PER_COMMIT", "300")
    monkeypatch.setenv("TIDELAKE_TABLE_TOPIC_MAX_ROWS_PER_CHUNK", "100")
    settings = load_settings(
        None,
        data_dir=str(tmp_path / "data"),
        kafka_listen="127.0.0.1:0",
        registry_listen="127.0.0.1:0",
        http_listen="127.0.0.1:0",
    )
    p = Platform(settings)
    await p.start()
    try:
        assert p.broker is not None
        await p.broker.logs.create_topic("backlog", 1, 1, {})
        for s in range(0, 1000, 100):
            await append(p, "backlog", [(None, b"v%d" % i) for i in range(s, s + 100)])
        await p.broker.logs.set_configs(
            "backlog",
            {
                "table.topic.enable": "true",
                "table.topic.convert.value.type": "string",
                "table.topic.commit.interval.ms": "60000",
            },
        )
        catalog = table_catalog(Path(p.settings.data_dir))
        # all of it, the last 100 rows too, well before the 60 s interval:
        # the commit that brings the table to the end of the log does not wait
        await wait_for(
            lambda: catalog.load_table(("default", "backlog")).scan().to_arrow().num_rows == 1000,
            within=30,
        )
        table = catalog.load_table(("default", "backlog"))
        added = [
            int(s.summary.additional_properties.get("added-records", "0"))
            for s in table.snapshots()
        ]
        assert max(added) <= 300 and sum(added) == 1000
        # once caught up, new records wait for the interval again
        await append(p, "backlog", [(None, b"late")])
        await asyncio.sleep(3)
        assert len(catalog.load_table(("default", "backlog")).snapshots()) == len(added)
    finally:
        await p.stop()


async def test_a_topic_created_again_appends_from_its_own_start(platform: Platform) -> None:
    p = platform
    assert p.broker is not None
    cfg = {"table.topic.enable": "true", "table.topic.convert.value.type": "string"}
    await p.broker.logs.create_topic("again", 1, 1, cfg)
    await append(p, "again", [(None, b"old%d" % i) for i in range(5)])
    catalog = table_catalog(Path(p.settings.data_dir))
    await wait_for(lambda: catalog.load_table(("default", "again")).scan().to_arrow().num_rows == 5)
    await p.broker.logs.delete_topic("again")
    await p.broker.logs.create_topic("again", 1, 1, cfg)
    await append(p, "again", [(None, b"new0"), (None, b"new1")])
    await wait_for(lambda: catalog.load_table(("default", "again")).scan().to_arrow().num_rows == 7)


async def test_protobuf_by_latest_schema_without_framing(platform: Platform) -> None:
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from schema_registry.service import SchemaRequest

    p = platform
    assert p.broker is not None
    fdp = descriptor_pb2.FileDescriptorProto(name="latest_pb.proto", package="lp", syntax="proto3")
    msg = fdp.message_type.add(name="Ping")
    F = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="seq", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="who", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    body = {"schema": base64.b64encode(fdp.SerializeToString()).decode(), "schemaType": "PROTOBUF"}
    p.table_topics.registry.register("pings-value", SchemaRequest.from_json(body))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    Ping = message_factory.GetMessageClass(pool.FindMessageTypeByName("lp.Ping"))
    await p.broker.logs.create_topic(
        "pings",
        1,
        1,
        {
            "table.topic.enable": "true",
            "table.topic.convert.value.type": "by_latest_schema",
            "table.topic.transform.value.type": "flatten",
        },
    )
    await append(
        p, "pings", [(None, Ping(seq=i, who=f"w{i}").SerializeToString()) for i in range(4)]
    )
    catalog = table_catalog(Path(p.settings.data_dir))
    await wait_for(lambda: catalog.load_table(("default", "pings")).scan().to_arrow().num_rows == 4)
    rows = catalog.load_table(("default", "pings")).scan().to_arrow().sort_by("seq").to_pylist()
    assert [(r["seq"], r["who"]) for r in rows] == [(i, f"w{i}") for i in range(4)]


async def test_table_writes_take_the_table_write_share_of_the_rate_limiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest.s3stream.network.limiter import TrafficClass

    p = await _start_platform(
        tmp_path, monkeypatch, TIDELAKE_STORAGE_NETWORK_BYTES_PER_SECOND=str(50 * 1024 * 1024)
    )
    try:
        assert p.broker is not None
        limiter = p.broker.engine.rate_limiter  # type: ignore[attr-defined]
        assert limiter.enabled and p.table_topics.throttle is not None
        await p.broker.logs.create_topic(
            "paced",
            1,
            1,
            {"table.topic.enable": "true", "table.topic.convert.value.type": "string"},
        )
        await append(p, "paced", [(None, b"x" * 100) for _ in range(500)])
        await wait_for(lambda: status_of(p, "paced")["rows_committed"] == 500)
        assert limiter.bytes[TrafficClass.TABLE_WRITE] >= 500 * 100
    finally:
        await p.stop()


NODE = {  # recursive: valid Avro, but no Iceberg column can hold it
    "type": "record",
    "name": "Node",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "next", "type": ["null", "Node"], "default": None},
    ],
}


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + body


async def read_all(p: Platform, topic: str) -> list[Any]:
    from contextlib import aclosing

    from ingest.protocol.records import decode_records

    assert p.broker is not None
    t = p.broker.logs.get(topic)
    if t is None:
        return []
    out: list[Any] = []
    for plog in t.partitions:
        async with aclosing(plog.scan(0)) as scan:
            async for view, h, _ in scan:
                out.extend(decode_records(view, h))
                if h.last_offset + 1 >= plog.high_watermark:
                    break
    return out


async def test_errors_tolerance_all_dead_letters_what_invalid_data_stops_at(
    platform: Platform,
) -> None:
    """A schema the table cannot use is not bad data: `invalid_data` stops the table (and
    keeps the records for when it is fixed); `all` dead-letters those records too."""
    p = platform
    assert p.broker is not None
    row_id = register(p, "tol-row", ROW)
    node_id = register(p, "tol-node", NODE)
    good1 = framed(row_id, avro({"id": 1, "v": "a"}))
    bad = framed(node_id, avro({"id": 2, "next": {"id": 3, "next": None}}, NODE))
    junk = b"\x00\x00\x00\x7f\x7f" + b"??"  # an id the registry never issued: invalid data
    good2 = framed(row_id, avro({"id": 4, "v": "b"}))
    base = {
        "table.topic.enable": "true",
        "table.topic.convert.value.type": "by_schema_id",
        "table.topic.transform.value.type": "flatten",
    }
    await p.broker.logs.create_topic(
        "tol-all", 1, 1, {**base, "table.topic.errors.tolerance": "all"}
    )
    await p.broker.logs.create_topic("tol-data", 1, 1, base)
    for topic in ("tol-all", "tol-data"):
        await append(p, topic, [(None, good1), (None, bad), (None, junk), (None, good2)])
    catalog = table_catalog(Path(p.settings.data_dir))

    await wait_for(lambda: status_of(p, "tol-all")["committed_offsets"].get(0) == 4)
    table_name = status_of(p, "tol-all")["table"]
    t = catalog.load_table(tuple(table_name.split("."))).scan().to_arrow()
    assert sorted(t.column("id").to_pylist()) == [1, 4]
    dead = await read_all(p, "tol-all.dlq")
    by_offset = {int(dict(r.headers)["tidelake.source.offset"]): dict(r.headers) for r in dead}
    assert set(by_offset) == {1, 2}
    assert b"recursive" in by_offset[1]["tidelake.error"]
    assert by_offset[1]["tidelake.error.class"] == b"TableTopicError"
    assert by_offset[2]["tidelake.error.class"] == b"InvalidDataError"
    assert status_of(p, "tol-all")["dead_letters"] == 2

    await wait_for(lambda: status_of(p, "tol-data")["state"] == "error")
    s = status_of(p, "tol-data")
    assert "recursive" in (s["last_error"] or "")
    assert s["committed_offsets"].get(0, 0) == 0 and s["lag"] == 4
    assert await read_all(p, "tol-data.dlq") == []
