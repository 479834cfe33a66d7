"""One contract over every TableSink: memory, Iceberg (SQLite catalog), Delta (local
directory) and the Iceberg+Delta fan-out of ``table.topic.format=both``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from table_topic.commit import TableWriter
from table_topic.config import TableTopicConfig
from table_topic.delta.location import DeltaLocation
from table_topic.delta.sink import DeltaSink
from table_topic.errors import ConcurrentWriterError, TableTopicConfigError
from table_topic.sink import FanoutSink, MemorySink, TableSink, rows_from
from tests.unit.table_topic.test_commit import cfg, rows

Factory = Callable[[TableTopicConfig], TableSink]


def _catalog(tmp: Path) -> SqlCatalog:
    return SqlCatalog("tidelake", uri=f"sqlite:///{tmp}/c.db", warehouse=(tmp / "wh").as_uri())


def _delta(tmp: Path, c: TableTopicConfig) -> DeltaSink:
    return DeltaSink(DeltaLocation(str(tmp / "delta")), c, 1 << 20, partitions=2)


@pytest.fixture(params=["memory", "iceberg", "delta", "both"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    memories: dict[str, MemorySink] = {}

    def make(c: TableTopicConfig) -> TableSink:
        kind = request.param
        if kind == "memory":  # one table per topic, as the catalogs hold it
            mem = memories.setdefault(c.topic, MemorySink(c))
            fresh = MemorySink(c)
            fresh.rows, fresh.committed, fresh.schema = mem.rows, mem.committed, mem.schema
            memories[c.topic] = fresh
            return _Shared(fresh, memories, c.topic)
        if kind == "iceberg":
            return TableWriter(_catalog(tmp_path), c, 1 << 20)
        if kind == "delta":
            return _delta(tmp_path, c)
        return FanoutSink([TableWriter(_catalog(tmp_path), c, 1 << 20), _delta(tmp_path, c)])

    return make


class _Shared:
    """A MemorySink view that writes its state back, so two sinks see one table."""

    def __init__(self, sink: MemorySink, shared: dict[str, MemorySink], topic: str) -> None:
        self.sink, self.shared, self.topic = sink, shared, topic

    @property
    def format(self) -> str:
        return self.sink.format

    def _sync_in(self) -> None:
        head = self.shared[self.topic]
        if head is not self.sink:
            self.sink.rows, self.sink.committed = head.rows, head.committed
            self.sink.schema = head.schema

    def offsets(self) -> dict[int, int] | None:
        self._sync_in()
        return self.sink.offsets()

    def ensure_table(self) -> object:
        return self.sink.ensure_table()

    def apply_partition_spec(self) -> bool:
        return False

    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        return self.sink.check_schemas(schemas)

    def commit(self, tables: list[pa.Table], offsets: dict[int, int]):  # type: ignore[no-untyped-def]
        self._sync_in()
        out = self.sink.commit(tables, offsets)
        self.shared[self.topic] = self.sink
        return out

    def expire_snapshots(self) -> int:
        return 0


def test_every_sink_is_a_table_sink(factory: Factory) -> None:
    assert isinstance(factory(cfg()), TableSink)


def test_offsets_are_none_before_the_first_commit_and_then_what_it_recorded(
    factory: Factory,
) -> None:
    s = factory(cfg())
    assert s.offsets() is None
    s.ensure_table()
    s.commit([rows([0, 1], {"id": pa.array([1, 2], pa.int64())})], {0: 2, 1: 0})
    s.commit([rows([0], {"id": pa.array([3], pa.int64())}, partition=1)], {1: 1})
    assert factory(cfg()).offsets() == {0: 2, 1: 1}


def test_a_writer_planned_from_old_offsets_is_refused_and_lands_nothing(factory: Factory) -> None:
    a, b = factory(cfg()), factory(cfg())
    a.offsets()
    b.offsets()
    a.commit([rows([0], {"id": pa.array([1], pa.int64())})], {0: 1})
    with pytest.raises(ConcurrentWriterError):
        b.commit([rows([0], {"id": pa.array([9], pa.int64())})], {0: 1})
    assert factory(cfg()).offsets() == {0: 1}


def test_compatible_schemas_are_taken_and_incompatible_ones_named(factory: Factory) -> None:
    s = factory(cfg())
    s.offsets()
    s.commit([rows([0], {"id": pa.array([1], pa.int32())})], {0: 1})
    wider = rows([1], {"id": pa.array([2**40], pa.int64()), "new": pa.array(["n"])})
    bad = rows([2], {"id": pa.array(["x"])})
    verdicts = s.check_schemas([wider.schema, bad.schema])
    assert verdicts[0] is None and verdicts[1] is not None
    s.commit([wider], {0: 2})
    assert factory(cfg()).offsets() == {0: 2}


def test_rows_from_drops_rows_below_each_partitions_record() -> None:
    t = pa.concat_tables([rows([0, 1, 2], {}, partition=0), rows([0, 1], {}, partition=1)])
    kept = pa.concat_tables(rows_from([t], {0: 2, 1: 0}))
    got = sorted(
        zip(kept["_kafka_partition"].to_pylist(), kept["_kafka_offset"].to_pylist(), strict=True)
    )
    assert got == [(0, 2), (1, 0), (1, 1)]


def test_both_resumes_from_the_lower_record_and_each_table_gets_each_row_once(
    tmp_path: Path,
) -> None:
    c = cfg()
    ice, delta = TableWriter(_catalog(tmp_path), c, 1 << 20), _delta(tmp_path, c)
    ice.offsets()
    ice.commit([rows([0, 1], {"id": pa.array([1, 2], pa.int64())})], {0: 2})  # Delta missed it
    both = FanoutSink([TableWriter(_catalog(tmp_path), c, 1 << 20), _delta(tmp_path, c)])
    assert both.offsets() is None or both.offsets() == {}
    both.commit([rows([0, 1, 2], {"id": pa.array([1, 2, 3], pa.int64())})], {0: 3})
    assert both.offsets() == {0: 3}
    iceberg_ids = sorted(
        _catalog(tmp_path).load_table(("default", "t")).scan().to_arrow()["id"].to_pylist()
    )
    delta_ids = sorted(DeltaTable(delta.uri).to_pyarrow_table()["id"].to_pylist())
    assert iceberg_ids == delta_ids == [1, 2, 3]


def test_delta_refuses_partition_transforms_it_cannot_express(tmp_path: Path) -> None:
    with pytest.raises(TableTopicConfigError, match="bucket"):
        _delta(tmp_path, cfg(**{"table.topic.partition.by": "[bucket(id, 4)]"}))


def test_delta_partitions_by_identity_and_day(tmp_path: Path) -> None:
    c = cfg(**{"table.topic.partition.by": "[region, day(_kafka_timestamp)]"})
    s = _delta(tmp_path, c)
    s.offsets()
    s.ensure_table()
    s.commit(
        [rows([0, 1], {"id": pa.array([1, 2], pa.int64()), "region": pa.array(["eu", "us"])})],
        {0: 2},
    )
    t = DeltaTable(s.uri)
    assert t.metadata().partition_columns == ["region", "_kafka_timestamp_day"]
    got = t.to_pyarrow_table().sort_by("id")
    assert got["region"].to_pylist() == ["eu", "us"]
    assert [str(d) for d in got["_kafka_timestamp_day"].to_pylist()] == ["2023-11-14"] * 2


def test_delta_upsert_keeps_the_last_row_per_id_and_deletes(tmp_path: Path) -> None:
    c = cfg(
        **{
            "table.topic.id.columns": "[id]",
            "table.topic.upsert.enable": "true",
            "table.topic.cdc.field": "op",
        }
    )
    s = _delta(tmp_path, c)
    s.offsets()
    s.commit(
        [
            rows(
                [0, 1, 2],
                {
                    "id": pa.array([1, 2, 1], pa.int64()),
                    "v": pa.array(["a", "b", "c"]),
                    "op": pa.array(["u", "u", "u"]),
                },
            )
        ],
        {0: 3},
    )
    s.commit(
        [
            rows(
                [3, 4],
                {
                    "id": pa.array([2, 3], pa.int64()),
                    "v": pa.array(["-", "d"]),
                    "op": pa.array(["d", "u"]),
                },
            )
        ],
        {0: 5},
    )
    got = DeltaTable(s.uri).to_pyarrow_table().sort_by("id")
    assert list(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True)) == [
        (1, "c"),
        (3, "d"),
    ]
    assert DeltaTable(s.uri).transaction_version(s.app_id(0)) == 5


def test_delta_writer_racing_past_the_offset_check_is_refused_by_delta_rs(tmp_path: Path) -> None:
    """b checks the offsets, writes its Parquet file; a commits the same partition in
    between; delta-rs's txn conflict check refuses b's commit and nothing of b lands."""
    c = cfg()
    a = _delta(tmp_path, c)
    a.offsets()

    def a_commits_now(point: str) -> None:
        if point == "files_written" and a.offsets() is None:
            a.commit([rows([0], {"id": pa.array([1], pa.int64())})], {0: 1})

    b = DeltaSink(DeltaLocation(str(tmp_path / "delta")), c, 1 << 20, a_commits_now, None, 2)
    b.offsets()
    b.ensure_table()
    with pytest.raises(ConcurrentWriterError):
        b.commit([rows([0], {"id": pa.array([9], pa.int64())})], {0: 1})
    t = DeltaTable(b.uri)
    assert t.to_pyarrow_table()["id"].to_pylist() == [1]
    assert t.transaction_version(b.app_id(0)) == 1
