"""The exactly-once commit of a topic's rows to a Delta Lake table (blocking; run in a thread).

Exactly once: every commit carries, in the same Delta log entry as its ``add``
actions, one ``txn`` action (Delta's transaction identifier) per topic-partition
it covers: ``appId = tidelake:<topic id>:<partition>`` and ``version`` = the next
Kafka offset of that partition. A Delta log entry is all or nothing, so the rows
and the offsets land together; on restart the sink reads each partition's
``txn`` version back (``DeltaTable.transaction_version``) and the workers resume
there. Parquet files written by a commit that never reached the log are not part
of the table (``vacuum`` removes them).

Why one ``txn`` per partition and not one per topic: a ``txn`` version is one
long, and a topic's progress is one offset per partition; packing several into
one number would either cap partitions or offsets. Per-partition app ids also
let the brokers of a cluster, each leading some partitions, commit to one table
without sharing a counter; a commit first checks that each of its partitions
still holds the version this writer planned from (another writer moving one
raises :class:`ConcurrentWriterError`, as the Iceberg path does), and a
writer that races past that check is refused by delta-rs's own conflict check
(a concurrent commit set one of its ``txn`` app ids). The topic id
in the app id keeps a deleted-and-recreated topic from resuming at the old
topic's offsets.

Schema evolution follows the Iceberg path's rules (``table_topic.evolution``):
the incoming schema is checked and merged as an Iceberg schema and the Delta
table takes the result (new columns, nested additions) with delta-rs's schema
merge. delta-rs cannot widen a column in place, so integer columns are written
as long, floats as double and decimals at precision 38 from the start: int ->
long, float -> double and decimal precision widening are then no change.
Upserts and CDC (``table.topic.id.columns`` with upsert or a CDC op) run as one
delta-rs ``merge`` keyed by the id columns, the last row per id chosen as the
Iceberg path chooses it.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction
from pyiceberg.schema import Schema

from table_topic.commit import (
    _DELETE_OPS,
    CommitResult,
    _last_per_key,
    _op_column,
    base_arrow_schema,
    clean_table,
)
from table_topic.config import TableTopicConfig
from table_topic.convert.conform import conform_table
from table_topic.delta.layout import DeltaPartition, check_source, delta_partitions, partition_value
from table_topic.delta.location import DeltaLocation, object_filesystem
from table_topic.errors import (
    ConcurrentWriterError,
    SchemaEvolutionError,
    TableTopicConfigError,
    TableTopicError,
)
from table_topic.evolution import check_compatible

__all__ = ["DeltaSink", "delta_type", "open_delta_table"]

log = logging.getLogger(__name__)

OFFSETS_KEY = "tidelake.offsets"
TOPIC_KEY = "tidelake.topic"
_DELETE_FLAG = "__tidelake_delete"


def delta_type(t: pa.DataType) -> pa.DataType:
    """The type a Delta table holds for ``t``: widened up front (see the module
    docstring), Delta's own types for Iceberg's time and uuid, no field metadata."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_decimal(t):
        return pa.decimal128(38, t.scale)
    if pa.types.is_time(t):
        return pa.int64()  # microseconds of the day: Delta has no time type
    if pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_struct(t):
        return pa.struct(
            [pa.field(t.field(i).name, delta_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", delta_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(delta_type(t.key_type), delta_type(t.item_type))
    return t


def delta_schema_of(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, delta_type(f.type)) for f in schema])


def open_delta_table(uri: str, storage_options: dict[str, str] | None) -> DeltaTable | None:
    try:
        return DeltaTable(uri, storage_options=storage_options or None)
    except TableNotFoundError:
        return None


FaultHook = Callable[[str], None]


def _no_fault(_point: str) -> None:
    return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DeltaSink:
    """A topic's Delta table (:class:`~table_topic.sink.TableSink`); one caller at a time."""

    def __init__(
        self,
        location: DeltaLocation,
        cfg: TableTopicConfig,
        target_file_size: int,
        fault: FaultHook = _no_fault,
        topic_id: str | None = None,
        partitions: int = 1,
    ) -> None:
        self.cfg = cfg
        self.location = location
        self.uri = location.table_uri(cfg.identifier())
        self.storage = dict(location.storage_options)
        self.target_file_size = target_file_size
        self.topic_id = topic_id
        self.partitions = partitions
        self.layout: list[DeltaPartition] = delta_partitions(cfg.partition_by)
        self._fault = fault
        self._table: DeltaTable | None = None
        self._known: dict[int, int | None] = {}

    @property
    def format(self) -> str:
        return "delta"

    def app_id(self, partition: int) -> str:
        return f"tidelake:{self.topic_id or self.cfg.topic}:{partition}"

    def load(self) -> DeltaTable | None:
        if self._table is None:
            self._table = open_delta_table(self.uri, self.storage)
        else:
            self._table.update_incremental()
        return self._table

    # ------------------------------------------------------------ offsets
    def _versions(self, table: DeltaTable | None, partitions: range | list[int]) -> dict[int, int]:
        if table is None:
            return {}
        out: dict[int, int] = {}
        for p in partitions:
            v = table.transaction_version(self.app_id(p))
            if v is not None:
                out[p] = v
        return out

    def offsets(self) -> dict[int, int] | None:
        found = self._versions(self.load(), range(self.partitions))
        self._known = {p: found.get(p) for p in range(self.partitions)}
        return found or None

    # ------------------------------------------------------------ table shape
    def ensure_table(self) -> DeltaTable | None:
        """Create the table now if its partition columns are known before any record
        (no partitioning, or only by metadata columns); else at the first commit."""
        table = self.load()
        if table is not None:
            return table
        base = delta_schema_of(base_arrow_schema(self.cfg))
        if all(p.source in base.names for p in self.layout):
            return self._create(base)
        return None

    def _create(self, data_schema: pa.Schema) -> DeltaTable:
        schema = self._with_partition_columns(data_schema)
        for p in self.layout:
            check_source(p, data_schema)
        self._table = DeltaTable.create(
            self.uri,
            schema,
            mode="ignore",
            partition_by=[p.name for p in self.layout] or None,
            name=self.cfg.table_name(),
            description=f"Kafka topic {self.cfg.topic} (Tidelake table topic)",
            storage_options=self.storage or None,
        )
        return self._table

    def _with_partition_columns(self, schema: pa.Schema) -> pa.Schema:
        for p in self.layout:
            if p.derived and p.name not in schema.names:
                assert p.type is not None
                schema = schema.append(pa.field(p.name, p.type))
        return schema

    def apply_partition_spec(self) -> bool:
        table = self.load()
        if table is None:
            return False
        have = list(table.metadata().partition_columns)
        want = [p.name for p in self.layout]
        if have != want:
            raise TableTopicConfigError(
                f"table.topic.partition.by: the Delta table {self.uri} is partitioned by "
                f"{have}; Delta cannot change a table's partition columns to {want}"
            )
        return False

    def _current(self, table: DeltaTable | None) -> Schema:
        """The table's data columns as an Iceberg schema (for the evolution rules)."""
        derived = {p.name for p in self.layout if p.derived}
        if table is None:
            arrow = base_arrow_schema(self.cfg)
        else:
            full = pa.schema(table.schema().to_arrow())
            arrow = pa.schema([f for f in full if f.name not in derived])
        return check_compatible(Schema(), arrow)

    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        current = self._current(self._table if self._table is not None else self.load())
        out: list[str | None] = []
        for s in schemas:
            try:
                current = check_compatible(current, s)
                out.append(None)
            except SchemaEvolutionError as exc:
                out.append(str(exc))
        return out

    # ------------------------------------------------------------- commit
    def commit(self, tables: list[pa.Table], offsets: dict[int, int]) -> CommitResult:
        table = self.load()
        head = self._versions(table, sorted(offsets))
        moved = {p: head.get(p) for p in offsets if head.get(p) != self._known.get(p)}
        if moved:
            raise ConcurrentWriterError(
                f"Delta table {self.uri}: another writer committed offsets {moved} since this "
                f"commit was planned from { {p: self._known.get(p) for p in moved} }"
            )
        current = self._current(table)
        seen: set[str] = set()
        for t in tables:
            key = t.schema.to_string(show_field_metadata=False)
            if key not in seen:
                seen.add(key)
                current = check_compatible(current, t.schema)
        target = delta_schema_of(current.as_arrow())
        data = (
            pa.concat_tables([conform_table(clean_table(t), target) for t in tables if t.num_rows])
            if any(t.num_rows for t in tables)
            else target.empty_table()
        )
        table = self._evolve(table, target)
        ops = None
        if self.cfg.keyed and data.num_rows:
            data, ops = self._latest(data)
        for p in self.layout:
            if p.derived:
                data = data.append_column(p.name, p.compute(data))
        props = CommitProperties(
            custom_metadata={
                OFFSETS_KEY: json.dumps({str(k): v for k, v in sorted(offsets.items())}),
                TOPIC_KEY: self.cfg.topic,
            },
            app_transactions=[
                Transaction(self.app_id(p), o, int(time.time() * 1000))
                for p, o in sorted(offsets.items())
            ],
        )
        try:
            if ops is not None:
                rows, files, deleted = self._merge(table, data, ops, props)
            else:
                rows, files, deleted = self._append(table, data, props)
        except CommitFailedError as exc:
            # delta-rs refuses a commit whose txn app ids another commit set since this
            # one read the table (a writer that raced the check above): nothing landed
            raise ConcurrentWriterError(
                f"Delta table {self.uri}: a concurrent commit took these partitions: {exc}"
            ) from exc
        self._known.update(offsets)
        self._fault("after_commit")
        return CommitResult(table.version(), rows, files, deleted)

    def _evolve(self, table: DeltaTable | None, target: pa.Schema) -> DeltaTable:
        """The table with ``target``'s data columns (created, or merged in: new columns only)."""
        if table is None:
            return self._create(target)
        full = self._with_partition_columns(target)
        have = pa.schema(table.schema().to_arrow())
        if delta_schema_of(have).equals(delta_schema_of(_ordered_like(full, have))):
            return table
        write_deltalake(
            table,
            full.empty_table(),
            mode="append",
            schema_mode="merge",
            partition_by=[p.name for p in self.layout] or None,
            storage_options=self.storage or None,
        )
        table.update_incremental()
        log.info("Delta table %s: schema evolved", self.uri)
        return table

    def _latest(self, data: pa.Table) -> tuple[pa.Table, pa.Array]:
        """One row per id, chosen as the Iceberg path chooses (commit._upsert_plan); and
        whether each is a delete."""
        ids = list(self.cfg.id_columns)
        missing = [c for c in ids if c not in data.column_names]
        if missing:
            raise TableTopicError(f"table.topic.id.columns {missing} are not columns of the table")
        data = _last_per_key(data, [*ids, "_kafka_partition"], "_kafka_offset")
        data = _last_per_key(data, ids, "_kafka_timestamp")
        op = _op_column(data, self.cfg)
        if op is None:
            return data, pa.array([False] * data.num_rows, pa.bool_())
        is_delete = pc.fill_null(pc.is_in(op, value_set=pa.array(sorted(_DELETE_OPS))), False)
        return data, is_delete

    def _merge(
        self, table: DeltaTable, data: pa.Table, is_delete: pa.Array, props: CommitProperties
    ) -> tuple[int, int, int]:
        source = data.append_column(_DELETE_FLAG, is_delete)
        on = " AND ".join(f"t.{_quote(c)} = s.{_quote(c)}" for c in self.cfg.id_columns)
        columns = {_quote(c): f"s.{_quote(c)}" for c in data.column_names}
        flag = f"s.{_quote(_DELETE_FLAG)}"
        metrics: dict[str, Any] = (
            table.merge(
                source,
                on,
                source_alias="s",
                target_alias="t",
                commit_properties=props,
            )
            .when_matched_delete(predicate=flag)
            .when_matched_update(updates=columns)
            .when_not_matched_insert(updates=columns, predicate=f"NOT {flag}")
            .execute()
        )
        deleted = int(pc.sum(is_delete).as_py() or 0)
        return data.num_rows - deleted, int(metrics.get("num_target_files_added", 0)), deleted

    # ------------------------------------------------------------ append
    def _filesystem(self) -> tuple[pafs.FileSystem, str]:
        if self.location.local:
            return pafs.LocalFileSystem(), self.uri
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(object_filesystem(self.location)))
        return fs, self.uri.split("://", 1)[1]

    def _groups(self, data: pa.Table) -> list[tuple[dict[str, str | None], pa.Table]]:
        """Rows per Delta partition (partition columns dropped: the log holds their values)."""
        if not self.layout:
            return [({}, data)]
        names = [p.name for p in self.layout]
        keys = list(zip(*(data.column(n).to_pylist() for n in names), strict=True))
        index: dict[tuple[Any, ...], list[int]] = {}
        for i, k in enumerate(keys):
            index.setdefault(k, []).append(i)
        out = []
        for k, rows in index.items():
            values = {n: partition_value(v) for n, v in zip(names, k, strict=True)}
            out.append((values, data.take(pa.array(rows, pa.int64())).drop_columns(names)))
        return out

    def _append(
        self, table: DeltaTable, data: pa.Table, props: CommitProperties
    ) -> tuple[int, int, int]:
        actions: list[AddAction | RemoveAction] = []  # as delta-rs 1.6.6 types it
        if data.num_rows:
            fs, base = self._filesystem()
            for values, part in self._groups(data):
                folder = "/".join(
                    f"{n}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}"
                    for n, v in values.items()
                )
                rel = (folder + "/" if folder else "") + f"part-{uuid.uuid4()}.zstd.parquet"
                path = f"{base}/{rel}"
                if self.location.local:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                with fs.open_output_stream(path) as out:
                    pq.write_table(part, out, compression="zstd")
                size = fs.get_file_info(path).size
                stats = json.dumps({"numRecords": part.num_rows})
                actions.append(AddAction(rel, size, values, int(time.time() * 1000), True, stats))
        self._fault("files_written")
        table.create_write_transaction(
            actions,
            "append",
            DeltaSchema.from_arrow(pa.schema(table.schema().to_arrow())),
            partition_by=[p.name for p in self.layout] or None,
            commit_properties=props,
        )
        return data.num_rows, len(actions), 0

    def expire_snapshots(self) -> int:
        """Delta versions go with ``tidelake maintenance`` (vacuum, checkpoint): nothing here."""
        return 0


def _ordered_like(schema: pa.Schema, like: pa.Schema) -> pa.Schema:
    """``schema``'s fields in ``like``'s order first (Delta appends merged columns at the end)."""
    order = {n: i for i, n in enumerate(like.names)}
    return pa.schema(sorted(schema, key=lambda f: order.get(f.name, len(order))))
