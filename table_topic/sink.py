"""Where a table topic's rows go: one :class:`TableSink` per table format.

A sink is one table format's copy of a topic (the Iceberg table through
pyiceberg, the Delta table through delta-rs, or :class:`MemorySink` for tests),
and it keeps its own exactly-once record: the next Kafka offset of each
partition it has committed, stored atomically with the rows of each commit.
The coordinator resumes from :meth:`TableSink.offsets` and hands each batch of
Arrow tables, with the offsets they reach, to :meth:`TableSink.commit`.

``table.topic.format=both`` is a :class:`FanoutSink` over an Iceberg and a Delta
sink: it resumes from the lower of the two records per partition and gives each
sink only the rows beyond its own record, so a crash between the two commits
neither loses nor duplicates rows in either table.

Guarantees every implementation gives (``tests/unit/table_topic/test_sink_contract.py``):
- ``commit`` is atomic: its rows and its offsets land together or not at all;
- ``offsets`` returns what the last landed commit recorded (None before any);
- a commit refused because another writer moved one of its partitions since
  this sink read them raises :class:`~table_topic.errors.ConcurrentWriterError`
  and lands nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema

from table_topic.commit import CommitResult, FaultHook, TableWriter, base_arrow_schema, clean_table
from table_topic.config import TableTopicConfig
from table_topic.convert.conform import conform_table
from table_topic.delta.location import DeltaLocation
from table_topic.errors import ConcurrentWriterError, SchemaEvolutionError
from table_topic.evolution import check_compatible

__all__ = ["FanoutSink", "MemorySink", "TableSink", "open_sink", "rows_from"]


@runtime_checkable
class TableSink(Protocol):
    """One table format's copy of a topic; blocking (run in a worker thread), one caller."""

    @property
    def format(self) -> str:
        """``iceberg``, ``delta`` or ``memory``."""
        ...

    def offsets(self) -> dict[int, int] | None:
        """The next offset per partition the table has committed (None: no commit yet);
        also what this sink's next commit expects to find there."""
        ...

    def ensure_table(self) -> object:
        """Create the table (with no rows) if it does not exist and can be created now."""
        ...

    def apply_partition_spec(self) -> bool:
        """Bring the table's partitioning to ``table.topic.partition.by``; True if it changed."""
        ...

    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        """Per schema, in order: None if the table can take it, else why not."""
        ...

    def commit(self, tables: list[pa.Table], offsets: dict[int, int]) -> CommitResult:
        """Rows and the offsets they reach, in one atomic commit."""
        ...

    def expire_snapshots(self) -> int:
        """Drop old table versions the topic's config says to drop; how many."""
        ...


def rows_from(tables: Sequence[pa.Table], committed: dict[int, int]) -> list[pa.Table]:
    """``tables`` without the rows below ``committed`` (per ``_kafka_partition``)."""
    out: list[pa.Table] = []
    for t in tables:
        if not committed or t.num_rows == 0:
            out.append(t)
            continue
        part = t.column("_kafka_partition")
        off = t.column("_kafka_offset")
        old = None
        for p, o in committed.items():
            term = pc.and_(pc.equal(part, p), pc.less(off, o))
            old = term if old is None else pc.or_(old, term)
        assert old is not None
        kept = t.filter(pc.invert(pc.fill_null(old, False)))
        if kept.num_rows:
            out.append(kept)
    return out


class FanoutSink:
    """Several sinks fed the same batches (``table.topic.format=both``), each with its
    own exactly-once record: resume from the lowest, give each only what it lacks."""

    def __init__(self, sinks: Sequence[TableSink]) -> None:
        assert sinks, "a fan-out needs at least one sink"
        self.sinks = list(sinks)
        self._committed: list[dict[int, int]] = [{} for _ in self.sinks]

    @property
    def format(self) -> str:
        return "+".join(s.format for s in self.sinks)

    def offsets(self) -> dict[int, int] | None:
        found = [s.offsets() for s in self.sinks]
        self._committed = [dict(f or {}) for f in found]
        if all(f is None for f in found):
            return None
        # a partition one sink has no record of starts where the topic starts
        common = set.intersection(*(set(c) for c in self._committed))
        return {p: min(c[p] for c in self._committed) for p in sorted(common)}

    def ensure_table(self) -> object:
        return [s.ensure_table() for s in self.sinks]

    def apply_partition_spec(self) -> bool:
        return any([s.apply_partition_spec() for s in self.sinks])

    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        verdicts = [s.check_schemas(schemas) for s in self.sinks]
        return [
            next((v[i] for v in verdicts if v[i] is not None), None) for i in range(len(schemas))
        ]

    def commit(self, tables: list[pa.Table], offsets: dict[int, int]) -> CommitResult:
        results: list[CommitResult] = []
        for i, sink in enumerate(self.sinks):
            mine = self._committed[i]
            ahead = {p: o for p, o in offsets.items() if p not in mine or o > mine[p]}
            rows = rows_from(tables, mine)
            if not ahead and not any(t.num_rows for t in rows):
                continue  # this sink has all of it already (it committed before a crash)
            results.append(sink.commit(rows, ahead))
            mine.update(ahead)
        if not results:
            return CommitResult(None, 0, 0)
        return CommitResult(
            results[0].snapshot_id,
            max(r.rows for r in results),
            sum(r.files for r in results),
            max(r.deleted for r in results),
        )

    def expire_snapshots(self) -> int:
        return sum(s.expire_snapshots() for s in self.sinks)


class MemorySink:
    """An in-memory table (tests): rows and offsets in one list, the Iceberg schema rules."""

    def __init__(self, cfg: TableTopicConfig) -> None:
        self.cfg = cfg
        self.rows: list[pa.Table] = []
        self.committed: dict[int, int] | None = None
        self.schema: Schema | None = None
        self._expected: dict[int, int] = {}

    @property
    def format(self) -> str:
        return "memory"

    def offsets(self) -> dict[int, int] | None:
        self._expected = dict(self.committed or {})
        return None if self.committed is None else dict(self.committed)

    def ensure_table(self) -> object:
        if self.schema is None:
            self.schema = check_compatible(Schema(), base_arrow_schema(self.cfg))
        return self

    def apply_partition_spec(self) -> bool:
        return False

    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        current = self.schema or check_compatible(Schema(), base_arrow_schema(self.cfg))
        out: list[str | None] = []
        for s in schemas:
            try:
                current = check_compatible(current, s)
                out.append(None)
            except SchemaEvolutionError as exc:
                out.append(str(exc))
        return out

    def commit(self, tables: list[pa.Table], offsets: dict[int, int]) -> CommitResult:
        head = self.committed or {}
        moved = {p: head.get(p) for p in offsets if head.get(p) != self._expected.get(p)}
        if moved:
            raise ConcurrentWriterError(f"another writer committed offsets {moved}")
        self.ensure_table()
        schema = self.schema
        assert schema is not None
        for t in tables:
            schema = check_compatible(schema, t.schema)
        self.schema = schema
        target = schema.as_arrow()
        self.rows = [conform_table(t, target) for t in self.rows]
        added = [conform_table(clean_table(t), target) for t in tables if t.num_rows]
        self.rows.extend(added)
        self.committed = {**head, **offsets}
        self._expected.update(offsets)
        return CommitResult(None, sum(t.num_rows for t in added), len(added), 0, time.time())

    def expire_snapshots(self) -> int:
        return 0

    def table(self) -> pa.Table:
        target = (self.schema or Schema()).as_arrow()
        return pa.concat_tables(self.rows) if self.rows else target.empty_table()


def open_sink(
    catalog: Catalog,
    cfg: TableTopicConfig,
    target_file_size: int,
    fault: FaultHook,
    topic_id: str | None,
    partitions: int,
    delta: DeltaLocation | None,
) -> TableSink:
    """The sink ``table.topic.format`` names: Iceberg, Delta or both (a fan-out)."""
    sinks: list[TableSink] = []
    if cfg.format.iceberg:
        sinks.append(TableWriter(catalog, cfg, target_file_size, fault, topic_id=topic_id))
    if cfg.format.delta:
        from table_topic.delta.location import require
        from table_topic.delta.sink import DeltaSink

        sinks.append(
            DeltaSink(require(delta, cfg.topic), cfg, target_file_size, fault, topic_id, partitions)
        )
    return sinks[0] if len(sinks) == 1 else FanoutSink(sinks)
