"""The commit protocol on a local SQLite catalog: offsets in snapshots, evolution, partition specs, upsert."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from ingest.log.topic_config import TopicConfigRegistry
from table_topic.commit import OFFSETS_PROPERTY, TableWriter, committed_offsets
from table_topic.config import TableTopicConfig, register_table_topic_configs
from table_topic.convert.chunk import METADATA_FIELDS
from table_topic.errors import ConcurrentWriterError, SchemaEvolutionError
from table_topic.evolution import check_compatible


def cfg(**overrides: str) -> TableTopicConfig:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    base = {
        "table.topic.convert.value.type": "by_schema_id",
        "table.topic.transform.value.type": "flatten",
    }
    return TableTopicConfig.from_topic_config(
        "t", reg.resolved(reg.validate({**base, **overrides}))
    )


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog(
        "tidelake", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri()
    )


def rows(offsets: list[int], extra: dict[str, pa.Array], partition: int = 0) -> pa.Table:
    n = len(offsets)
    meta = [
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array([1_700_000_000_000_000 + o for o in offsets], pa.timestamp("us", tz="UTC")),
        pa.array([None] * n, pa.binary()),
        pa.array([[]] * n, METADATA_FIELDS[4].type),
    ]
    return pa.Table.from_arrays(
        meta + list(extra.values()), names=[f.name for f in METADATA_FIELDS] + list(extra)
    )


def test_offsets_walk_back_past_snapshots_without_them(catalog: SqlCatalog) -> None:
    w = TableWriter(catalog, cfg(), 1 << 20)
    assert w.offsets() is None
    w.commit([rows([0, 1], {"id": pa.array([1, 2], pa.int64())})], {0: 2, 1: 0})
    w.commit([rows([2], {"id": pa.array([3], pa.int64())})], {0: 3, 1: 0})
    table = catalog.load_table(("default", "t"))
    table.append(table.scan().to_arrow().slice(0, 0))  # a maintenance-like snapshot without offsets
    table = catalog.load_table(("default", "t"))
    assert OFFSETS_PROPERTY not in table.current_snapshot().summary.additional_properties
    assert committed_offsets(table) == {0: 3, 1: 0}
    assert TableWriter(catalog, cfg(), 1 << 20).offsets() == {0: 3, 1: 0}


def test_evolution_merges_compatible_and_refuses_incompatible(catalog: SqlCatalog) -> None:
    w = TableWriter(catalog, cfg(), 1 << 20)
    w.commit(
        [rows([0], {"id": pa.array([1], pa.int32()), "x": pa.array([1.0], pa.float32())})], {0: 1}
    )
    v2 = rows(
        [1],
        {
            "id": pa.array([2], pa.int64()),
            "x": pa.array([2.0], pa.float64()),
            "new": pa.array(["n"]),
        },
    )
    assert w.check_schemas([v2.schema]) == [None]
    bad = rows([2], {"id": pa.array(["s"], pa.string())})
    verdict = w.check_schemas([bad.schema])[0]
    assert verdict is not None and "incompatible" in verdict
    w.commit([v2], {0: 2})
    t = catalog.load_table(("default", "t"))
    schema = t.schema()
    assert str(schema.find_field("id").field_type) == "long"
    assert str(schema.find_field("x").field_type) == "double"
    got = t.scan().to_arrow().sort_by("_kafka_offset")
    assert got.column("id").to_pylist() == [1, 2]
    assert got.column("new").to_pylist() == [None, "n"]
    with pytest.raises(SchemaEvolutionError):
        check_compatible(schema, pa.schema([("x", pa.string())]))


def test_partition_spec_follows_the_config(catalog: SqlCatalog) -> None:
    data = rows([0, 1], {"id": pa.array([1, 2], pa.int64())})
    TableWriter(catalog, cfg(**{"table.topic.partition.by": "[bucket(id, 4)]"}), 1 << 20).commit(
        [data], {0: 2}
    )
    t = catalog.load_table(("default", "t"))
    assert [str(f.transform) for f in t.spec().fields] == ["bucket[4]"]
    w = TableWriter(
        catalog, cfg(**{"table.topic.partition.by": "[day(_kafka_timestamp), id]"}), 1 << 20
    )
    w.commit([rows([2], {"id": pa.array([3], pa.int64())})], {0: 3})
    t = catalog.load_table(("default", "t"))
    live = [str(f.transform) for f in t.spec().fields if str(f.transform) != "void"]
    assert sorted(live) == ["day", "identity"]
    assert t.scan().to_arrow().num_rows == 3


def test_upsert_dedupes_within_a_batch_and_replaces_across_commits(catalog: SqlCatalog) -> None:
    c = cfg(**{"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"})
    w = TableWriter(catalog, c, 1 << 20)
    w.commit(
        [rows([0, 1, 2], {"id": pa.array([1, 2, 1], pa.int64()), "v": pa.array(["a", "b", "c"])})],
        {0: 3},
    )
    w.commit([rows([3], {"id": pa.array([2], pa.int64()), "v": pa.array(["d"])})], {0: 4})
    got = catalog.load_table(("default", "t")).scan().to_arrow()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == {
        1: "c",
        2: "d",
    }
    assert committed_offsets(catalog.load_table(("default", "t"))) == {0: 4}


def test_upsert_with_composite_ids_and_many_keys(catalog: SqlCatalog) -> None:
    c = cfg(**{"table.topic.id.columns": "a, b", "table.topic.upsert.enable": "true"})
    w = TableWriter(catalog, c, 1 << 20)
    n = 3000
    a = pa.array([i % 50 for i in range(n)], pa.int64())
    b = pa.array([f"b{i // 50}" for i in range(n)])
    w.commit([rows(list(range(n)), {"a": a, "b": b, "v": pa.array(["old"] * n)})], {0: n})
    w.commit(
        [rows(list(range(n, 2 * n)), {"a": a, "b": b, "v": pa.array(["new"] * n)})], {0: 2 * n}
    )
    got = catalog.load_table(("default", "t")).scan().to_arrow()
    assert got.num_rows == n and set(got.column("v").to_pylist()) == {"new"}


def _as_map(t: pa.Table) -> dict[int, str]:
    ids = t.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id appears twice"
    return dict(zip(ids, t.column("v").to_pylist(), strict=True))


def _kv(offsets: list[int], ids: list[int], vs: list[str]) -> pa.Table:
    return rows(offsets, {"id": pa.array(ids, pa.int64()), "v": pa.array(vs)})


def test_upsert_is_merge_on_read_with_position_deletes(catalog: SqlCatalog) -> None:
    c = cfg(**{"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"})
    w = TableWriter(catalog, c, 1 << 20)
    w.commit([_kv([0, 1, 2, 3], [1, 2, 3, 4], ["a", "b", "c", "d"])], {0: 4})
    first = catalog.load_table(("default", "t"))
    first_files = {t.file.file_path for t in first.scan().plan_files()}
    w.commit([_kv([4, 5], [2, 4], ["B", "D"])], {0: 6})
    t = catalog.load_table(("default", "t"))
    snap = t.current_snapshot()
    assert snap is not None and snap.summary is not None
    extra = snap.summary.additional_properties
    # the first commit's file stays; two of its rows are hidden by one position delete file
    assert snap.summary.operation.value == "overwrite"
    assert extra.get("added-position-delete-files") == "1"
    assert extra.get("added-position-deletes") == "2"
    assert "deleted-data-files" not in extra
    assert first_files <= {task.file.file_path for task in t.scan().plan_files()}
    tasks = [task for task in t.scan().plan_files() if task.file.file_path in first_files]
    assert len(tasks) == 1 and len(tasks[0].delete_files) == 1
    (delete_file,) = tasks[0].delete_files
    dels = pq.read_table(delete_file.file_path.removeprefix("file://"))
    assert dels.column_names == ["file_path", "pos"]
    assert dels.column("file_path").to_pylist() == [tasks[0].file.file_path] * 2
    assert dels.column("pos").to_pylist() == [1, 3]  # ids 2 and 4 were rows 1 and 3
    assert _as_map(t.scan().to_arrow()) == {1: "a", 2: "B", 3: "c", 4: "D"}
    # replacing id 2 again deletes only the live row, not the already-deleted one again
    w.commit([_kv([6], [2], ["BB"])], {0: 7})
    t = catalog.load_table(("default", "t"))
    assert t.current_snapshot().summary.additional_properties["added-position-deletes"] == "1"  # type: ignore[union-attr]
    assert _as_map(t.scan().to_arrow()) == {1: "a", 2: "BB", 3: "c", 4: "D"}
    assert committed_offsets(t) == {0: 7}


def test_cdc_deletes_on_a_partitioned_table_land_in_the_data_files_partition(
    catalog: SqlCatalog,
) -> None:
    c = cfg(
        **{
            "table.topic.id.columns": "id",
            "table.topic.cdc.field": "op",
            "table.topic.partition.by": "[bucket(id, 4)]",
        }
    )
    w = TableWriter(catalog, c, 1 << 20)
    n = 200
    ref = {i: f"v{i}" for i in range(n)}
    w.commit(
        [
            rows(
                list(range(n)),
                {
                    "id": pa.array(list(range(n)), pa.int64()),
                    "v": pa.array([ref[i] for i in range(n)]),
                    "op": pa.array(["c"] * n),
                },
            )
        ],
        {0: n},
    )
    gone = list(range(0, n, 3))
    upd = list(range(1, n, 3))
    for i in gone:
        ref.pop(i)
    for i in upd:
        ref[i] = f"u{i}"
    ids = gone + upd
    w.commit(
        [
            rows(
                list(range(n, n + len(ids))),
                {
                    "id": pa.array(ids, pa.int64()),
                    "v": pa.array([ref.get(i, "x") for i in ids]),
                    "op": pa.array(["d"] * len(gone) + ["u"] * len(upd)),
                },
            )
        ],
        {0: n + len(ids)},
    )
    t = catalog.load_table(("default", "t"))
    assert _as_map(t.scan().to_arrow()) == ref
    for task in t.scan().plan_files():
        for d in task.delete_files:
            assert d.partition == task.file.partition and d.spec_id == task.file.spec_id
    extra = t.current_snapshot().summary.additional_properties  # type: ignore[union-attr]
    assert int(extra["added-position-delete-files"]) == 4  # one per bucket
    assert int(extra["added-position-deletes"]) == len(ids)


def test_a_concurrent_rewrite_of_the_deleted_rows_file_makes_the_commit_plan_again(
    catalog: SqlCatalog,
) -> None:
    """Spark compaction replacing the file a position delete points at, between our
    planning and our commit: the commit must not land deletes against a dead file."""
    c = cfg(**{"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"})
    rewrites = []

    def rewrite_once(point: str) -> None:
        if point != "files_written" or rewrites:
            return
        other = catalog.load_table(("default", "t"))
        live = other.scan().to_arrow()
        other.overwrite(live)  # new files with the same rows, old ones removed
        rewrites.append(live.num_rows)

    w = TableWriter(catalog, c, 1 << 20)
    w.commit([_kv([0, 1, 2], [1, 2, 3], ["a", "b", "c"])], {0: 3})
    w._fault = rewrite_once
    w.commit([_kv([3, 4], [1, 3], ["A", "C"])], {0: 5})
    assert rewrites == [3]
    t = catalog.load_table(("default", "t"))
    assert _as_map(t.scan().to_arrow()) == {1: "A", 2: "b", 3: "C"}
    assert committed_offsets(t) == {0: 5}


@pytest.mark.parametrize("keyed", [False, True])
def test_a_second_writer_of_the_same_topic_cannot_commit_the_same_offsets_twice(
    catalog: SqlCatalog, keyed: bool
) -> None:
    """Two brokers (or a zombie) converting the same topic: the one that planned from
    stale offsets is refused instead of appending the same records again."""
    extra = {"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"} if keyed else {}
    c = cfg(**extra)
    first, second = TableWriter(catalog, c, 1 << 20), TableWriter(catalog, c, 1 << 20)
    first.commit([_kv([0, 1], [1, 2], ["a", "b"])], {0: 2})
    assert second.offsets() == {0: 2}  # both writers start from the same table state
    first.commit([_kv([2, 3, 4], [3, 4, 5], ["c", "d", "e"])], {0: 5})
    with pytest.raises(ConcurrentWriterError):
        second.commit([_kv([2, 3, 4], [3, 4, 5], ["c", "d", "e"])], {0: 5})
    t = catalog.load_table(("default", "t"))
    assert t.scan().to_arrow().num_rows == 5
    assert committed_offsets(t) == {0: 5}
    # starting again from the table, as the coordinator does, the second writer goes on
    assert second.offsets() == {0: 5}
    second.commit([_kv([5], [6], ["f"])], {0: 6})
    assert catalog.load_table(("default", "t")).scan().to_arrow().num_rows == 6


def test_the_first_keyed_rows_after_an_empty_commit_add_the_id_column(
    catalog: SqlCatalog,
) -> None:
    # a commit of offsets alone (nothing converted yet) creates the table without
    # the id column; the next commit's delete planning must not look for ids in it
    c = cfg(**{"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"})
    w = TableWriter(catalog, c, 1 << 20)
    w.commit([], {0: 0})
    w.commit(
        [rows([0, 1], {"id": pa.array([1, 1], pa.int64()), "v": pa.array(["a", "b"])})], {0: 2}
    )
    w.commit([rows([2], {"id": pa.array([1], pa.int64()), "v": pa.array(["c"])})], {0: 3})
    got = catalog.load_table(("default", "t")).scan().to_arrow()
    assert got.column("v").to_pylist() == ["c"]
