"""Compaction, manifest and delete rewrites on tables written by many small commits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark.jobs import rewrite_data_files, rewrite_manifests, rewrite_position_delete_files
from tests.integration.spark.conftest import (
    Platform,
    append_with_offsets,
    batch,
    checksum,
    data_file_count,
    small_append_table,
    spark_rows,
)

pytestmark = pytest.mark.spark


def test_spark_reads_a_table_written_by_small_streaming_commits(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "stream.read", commits=12)
    assert checksum(spark_rows(spark, "stream.read")) == checksum(table.scan().to_arrow())
    offsets = spark.sql(
        "SELECT summary['tidelake.offsets'] AS o FROM stream.read.snapshots "
        "ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0]["o"]
    assert offsets == '{"0": 120}'


def test_binpack_compaction_cuts_file_count_and_keeps_rows_and_checksum(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "stream.binpack", commits=20)
    before = checksum(table.scan().to_arrow())
    assert data_file_count(table) == 20
    result = rewrite_data_files(
        spark, "tidelake", "stream.binpack", target_file_size_bytes=64 * 1024 * 1024
    )
    assert result.metrics["rewritten_data_files_count"] == 20
    assert result.metrics["added_data_files_count"] == 1
    assert data_file_count(table) == 1
    assert checksum(table.scan().to_arrow()) == before
    assert checksum(spark_rows(spark, "stream.binpack")) == before
    assert table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]


def test_sort_compaction_orders_rows_by_the_configured_columns(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "stream.sorted", commits=6)
    before = checksum(table.scan().to_arrow())
    rewrite_data_files(
        spark, "tidelake", "stream.sorted", strategy="sort", sort_columns=["key", "id DESC"]
    )
    table.refresh()
    tasks = list(table.scan().plan_files())
    assert len(tasks) == 1
    path = tasks[0].file.file_path.removeprefix("file:")
    rows = pq.read_table(path).to_pylist()
    assert [(r["key"], -r["id"]) for r in rows] == sorted((r["key"], -r["id"]) for r in rows)
    assert checksum(table.scan().to_arrow()) == before


def test_rewrite_manifests_merges_one_manifest_per_commit(spark: Any, platform: Platform) -> None:
    table = small_append_table(platform.catalog, "stream.manifests", commits=8)
    before = len(table.current_snapshot().manifests(table.io))  # type: ignore[union-attr]
    assert before >= 8
    result = rewrite_manifests(spark, "tidelake", "stream.manifests")
    table.refresh()
    after = len(table.current_snapshot().manifests(table.io))  # type: ignore[union-attr]
    assert after < before and result.metrics["rewritten_manifests_count"] == before
    assert checksum(table.scan().to_arrow())[0] == 80


def test_rewrite_position_delete_files_compacts_deletes_and_keeps_deleted_rows_gone(
    spark: Any, platform: Platform
) -> None:
    small_append_table(
        platform.catalog,
        "stream.deletes",
        commits=3,
        **{"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"},
    )
    for victim in (1, 2, 11, 12):
        spark.sql(f"DELETE FROM stream.deletes WHERE id = {victim}")
    deletes = spark.sql("SELECT count(*) FROM stream.deletes.delete_files").collect()[0][0]
    assert deletes >= 2  # one per touched data file (Iceberg merges a file's earlier deletes)
    result = rewrite_position_delete_files(
        spark, "tidelake", "stream.deletes", options={"rewrite-all": "true"}
    )
    assert result.metrics["rewritten_delete_files_count"] == deletes
    assert result.metrics["added_delete_files_count"] <= deletes
    table = platform.catalog.load_table("stream.deletes")
    ids = {r["id"] for r in table.scan().to_arrow().to_pylist()}
    assert ids == set(range(30)) - {1, 2, 11, 12}


def test_compaction_racing_concurrent_commits_keeps_every_row_exactly_once(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "stream.race", commits=30)
    stop = threading.Event()
    written: list[int] = []
    errors: list[BaseException] = []

    def coordinator() -> None:
        writer = platform.catalog.load_table("stream.race")
        next_id = 300
        try:
            while not stop.is_set() or len(written) < 3:
                append_with_offsets(writer, batch(next_id, 10), next_id + 10)
                written.append(next_id)
                next_id += 10
                # a commit every 50 ms: dozens land during each rewrite, yet the
                # rewrite's own commit (with Iceberg's retries) gets a window
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=coordinator)
    thread.start()
    try:
        for _ in range(2):
            rewrite_data_files(spark, "tidelake", "stream.race", min_input_files=2)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not errors, errors
    expected = 300 + 10 * len(written)
    table.refresh()
    ids = [r["id"] for r in table.scan().to_arrow().to_pylist()]
    assert len(ids) == expected and set(ids) == set(range(expected))
    spark_ids = [r["id"] for r in spark_rows(spark, "stream.race")]
    assert sorted(spark_ids) == list(range(expected))
    # The newest commit with offsets is still found by walking back from the head.
    snapshot = table.current_snapshot()
    while snapshot is not None and "tidelake.offsets" not in snapshot.summary:  # type: ignore[operator]
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id)  # type: ignore[arg-type]
    assert snapshot is not None
    assert snapshot.summary["tidelake.offsets"] == f'{{"0": {expected}}}'  # type: ignore[index]


def test_unknown_strategy_is_refused(spark: Any) -> None:
    from spark.errors import MaintenanceJobError

    with pytest.raises(MaintenanceJobError):
        rewrite_data_files(spark, "tidelake", "stream.read", strategy="zigzag")


def test_compaction_racing_concurrent_deletes_retries_and_never_resurrects_or_loses_rows(
    spark: Any, platform: Platform
) -> None:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import EqualTo

    table = small_append_table(platform.catalog, "stream.upserts", commits=12)
    deleted: list[int] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def deleter() -> None:
        writer = platform.catalog.load_table("stream.upserts")
        victim = 0
        try:
            while not stop.is_set() and victim < 30:
                for _ in range(20):
                    try:
                        writer.delete(EqualTo("id", victim))
                        break
                    except CommitFailedException:
                        writer.refresh()
                deleted.append(victim)
                victim += 3
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=deleter)
    thread.start()
    try:
        # Each delete rewrites a data file the compaction may be replacing: its commit
        # then fails validation and the job retries from the fresh table state.
        result = rewrite_data_files(
            spark, "tidelake", "stream.upserts", min_input_files=2, attempts=10
        )
    finally:
        stop.set()
        thread.join(timeout=120)
    assert result.metrics["rewritten_data_files_count"] >= 2
    assert not errors, errors
    table.refresh()
    ids = [r["id"] for r in table.scan().to_arrow().to_pylist()]
    assert sorted(ids) == sorted(set(range(120)) - set(deleted))
    assert sorted(r["id"] for r in spark_rows(spark, "stream.upserts")) == sorted(ids)


def test_compaction_racing_merge_on_read_upserts_keeps_the_latest_row_per_id(
    spark: Any, platform: Platform
) -> None:
    """A table topic's upsert commits (position deletes into the files Spark is
    rewriting) race bin-pack compaction. The rewrite's lease holds the upserts while
    it runs (without it, every rewrite conflicts and compaction never lands); no id
    is lost, duplicated or brought back, and the writer goes on afterwards."""
    import random

    import pyarrow as pa

    from catalog.properties import REWRITE_LEASE_PROPERTY
    from ingest.log.topic_config import TopicConfigRegistry
    from table_topic.commit import TableWriter, committed_offsets
    from table_topic.config import TableTopicConfig, register_table_topic_configs
    from table_topic.convert.chunk import METADATA_FIELDS

    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    cfg = TableTopicConfig.from_topic_config(
        "race_upserts",
        reg.resolved(
            reg.validate(
                {
                    "table.topic.convert.value.type": "by_schema_id",
                    "table.topic.transform.value.type": "flatten",
                    "table.topic.namespace": "stream",
                    "table.topic.id.columns": "id",
                    "table.topic.upsert.enable": "true",
                }
            )
        ),
    )
    writer = TableWriter(platform.catalog, cfg, 1 << 20)
    rnd = random.Random(3)
    ref: dict[int, str] = {}
    offset = 0

    def commit_wave(n: int) -> None:
        nonlocal offset
        ids = [rnd.randrange(200) for _ in range(n)]
        vs = [f"v{offset + i}" for i in range(n)]
        meta = [
            pa.array([0] * n, pa.int32()),
            pa.array(range(offset, offset + n), pa.int64()),
            pa.array([1_700_000_000_000_000 + offset + i for i in range(n)], pa.timestamp("us", tz="UTC")),
            pa.array([None] * n, pa.binary()),
            pa.array([[]] * n, METADATA_FIELDS[4].type),
        ]
        rows = pa.Table.from_arrays(
            [*meta, pa.array(ids, pa.int64()), pa.array(vs)],
            names=[f.name for f in METADATA_FIELDS] + ["id", "v"],
        )
        writer.commit([rows], {0: offset + n})
        for i, v in zip(ids, vs, strict=True):
            ref[i] = v
        offset += n

    for _ in range(12):  # many small files for Spark to compact
        commit_wave(40)
    stop = threading.Event()
    errors: list[BaseException] = []
    waves = [0]

    def coordinator() -> None:
        try:
            while not stop.is_set() or waves[0] < 3:
                commit_wave(40)
                waves[0] += 1
                time.sleep(0.1)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=coordinator)
    thread.start()
    rewritten = 0
    try:
        for _ in range(3):
            result = rewrite_data_files(
                spark, "tidelake", "stream.race_upserts", options={"rewrite-all": "true"}
            )
            rewritten += result.metrics.get("rewritten_data_files_count", 0)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not errors, errors
    assert rewritten > 0 and waves[0] >= 3  # both sides really committed during the race
    table = platform.catalog.load_table("stream.race_upserts")
    assert REWRITE_LEASE_PROPERTY not in table.properties  # released
    table = platform.catalog.load_table("stream.race_upserts")
    got = table.scan().to_arrow()
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == len(ref)
    assert dict(zip(ids, got.column("v").to_pylist(), strict=True)) == ref
    assert committed_offsets(table) == {0: offset}
    spark.sql("REFRESH TABLE tidelake.stream.race_upserts")
    spark_map = {
        r.id: r.v for r in spark.sql("SELECT id, v FROM tidelake.stream.race_upserts").collect()
    }
    assert spark_map == ref
