"""The commit protocol: Arrow tables + offsets -> one Iceberg snapshot (blocking; run in a thread).

Exactly once: every commit records, in the snapshot summary, the next offset of
EVERY partition of the topic (``tidelake.offsets`` = JSON {partition: offset}),
atomically with the data files. Workers resume from the newest snapshot that
carries the property, walking back through parent snapshots (compaction or
maintenance snapshots do not carry it). The same JSON is kept as a table
property in the same metadata commit, as a fallback once snapshots expire.

Several writers (the brokers of a cluster, each converting the partitions it
leads) commit to one table by per-partition compare-and-merge: a commit covering
partitions P lands only if, for every p in P, the table head's offset of p is the
one this writer planned from; its offsets JSON is the head's map with P's entries
replaced. Another writer's commit of OTHER partitions only rebases the commit on
the new head (the merge is recomputed there); a commit of one of P (a stale
leader, or a new leader racing an old one's last commit) refuses it with
:class:`ConcurrentWriterError`, and the writer starts again from the table. So
two writers can never both commit the same offsets of a partition.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In, Or
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.update import SetPropertiesUpdate

from catalog.properties import REWRITE_LEASE_PROPERTY
from table_topic.config import TableTopicConfig
from table_topic.convert.chunk import CDC_OP, METADATA_FIELDS
from table_topic.convert.conform import conform_table
from table_topic.errors import ConcurrentWriterError, SchemaEvolutionError, TableTopicError
from table_topic.evolution import check_compatible, evolve_schema
from table_topic.partitioning import evolve_spec
from table_topic.rowdelta import RowDelta, find_position_deletes, write_position_delete_files

__all__ = ["OFFSETS_PROPERTY", "CommitResult", "TableWriter", "committed_offsets"]

log = logging.getLogger(__name__)

OFFSETS_PROPERTY = "tidelake.offsets"
TOPIC_PROPERTY = "tidelake.topic"
TOPIC_ID_PROPERTY = "tidelake.topic.id"
_DELETE_OPS = {"d", "delete", "D", "DELETE"}
_CONFLICT_RETRIES = 4
_MAX_REWRITE_WAIT_S = 60.0


def _parse_offsets(text: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in json.loads(text).items()}


def committed_offsets(table: Table, topic_id: str | None = None) -> dict[int, int] | None:
    """Offsets recorded by the newest snapshot (walking parents) that carries them.

    With ``topic_id``: offsets written for another incarnation of the topic
    (deleted and created again under the same name) do not count: None.
    """
    meta = table.metadata
    snap = table.current_snapshot()
    found: dict[str, str] | None = None
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if OFFSETS_PROPERTY in props:
            found = props
            break
        snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
    if found is None and OFFSETS_PROPERTY in table.properties:
        found = table.properties
    if found is None:
        return None
    if topic_id is not None and found.get(TOPIC_ID_PROPERTY, topic_id) != topic_id:
        return None
    return _parse_offsets(found[OFFSETS_PROPERTY])


@dataclass
class CommitResult:
    snapshot_id: int | None
    rows: int
    files: int
    deleted: int = 0
    committed_at: float = field(default_factory=time.time)


def base_arrow_schema(cfg: TableTopicConfig) -> pa.Schema:
    """Columns every table starts with: metadata, and key/value when they are not schema-driven."""
    fields = list(METADATA_FIELDS)
    from table_topic.config import ConvertType, TransformType

    if cfg.key_type is ConvertType.STRING:
        fields.append(pa.field("key", pa.string()))
    if cfg.transform is TransformType.NONE:
        if cfg.value_type is ConvertType.RAW:
            fields.append(pa.field("value", pa.binary()))
        elif cfg.value_type is ConvertType.STRING:
            fields.append(pa.field("value", pa.string()))
    return pa.schema(fields)


FaultHook = Callable[[str], None]


def _no_fault(_point: str) -> None:
    return None


class TableWriter:
    """Blocking table operations for one topic's table; one caller at a time."""

    def __init__(
        self,
        catalog: Catalog,
        cfg: TableTopicConfig,
        target_file_size: int,
        fault: FaultHook = _no_fault,
        topic_id: str | None = None,
    ) -> None:
        self.topic_id = topic_id
        self.catalog = catalog
        self.cfg = cfg
        self.target_file_size = target_file_size
        self._table: Table | None = None
        self._fault = fault
        # What this writer's next commit must find in the table, per partition: the
        # table's whole map when it last read it (None until it has), overridden by
        # partitions it re-read alone or committed since (None: not in the table).
        self._base: dict[int, int] | None = None
        self._known: dict[int, int | None] = {}

    @property
    def format(self) -> str:
        return "iceberg"

    @property
    def identifier(self) -> tuple[str, ...]:
        return self.cfg.identifier()

    def load(self, refresh: bool = True) -> Table | None:
        if self._table is not None and not refresh:
            return self._table
        try:
            self._table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            self._table = None
        return self._table

    def offsets(self) -> dict[int, int] | None:
        """The table's committed offsets; also what this writer's next commit must
        find there (see ``_commit_once``)."""
        table = self.load()
        found = committed_offsets(table, self.topic_id) if table is not None else None
        self._base = dict(found or {})
        self._known = {}
        return found

    def offsets_for(self, partitions: Iterable[int]) -> dict[int, int]:
        """The table's committed offsets of ``partitions`` (those it has), re-read now;
        this writer's next commits of them must find these (a partition that came to
        this broker: its last leader may have committed since the map was read)."""
        table = self.load()
        found = (committed_offsets(table, self.topic_id) if table is not None else None) or {}
        out: dict[int, int] = {}
        for p in partitions:
            self._known[p] = found.get(p)
            if p in found:
                out[p] = found[p]
        return out

    def _expected(self, p: int, head: dict[int, int]) -> int | None:
        if p in self._known:
            return self._known[p]
        if self._base is not None:
            return self._base.get(p)
        return head.get(p)  # never read: plan from the table as this commit finds it

    def _wait_for_rewrite(self, table: Table) -> Table:
        """Hold a keyed commit while a data-file rewrite holds the table's lease (its
        position deletes would make the rewrite fail); bounded by the lease and by
        ``_MAX_REWRITE_WAIT_S``."""
        deadline = time.monotonic() + _MAX_REWRITE_WAIT_S
        while True:
            until = table.properties.get(REWRITE_LEASE_PROPERTY)
            try:
                left_s = int(until) / 1000 - time.time() if until else 0.0
            except ValueError:
                left_s = 0.0
            if left_s <= 0 or time.monotonic() >= deadline:
                return table
            log.info("table %s: a rewrite holds the table; commit waits", self.identifier)
            time.sleep(min(0.5, left_s))
            table = self.load(refresh=True) or table

    def apply_partition_spec(self) -> bool:
        """Evolve an existing table's spec to ``table.topic.partition.by`` now, without new data.

        A config change restarts the coordinator; records already taken by the old one may have
        been committed under the old spec, so the new layout must not wait for the next record.
        """
        table = self.load(refresh=False)
        if table is None:
            return False
        txn = table.transaction()
        if not evolve_spec(txn, self.cfg.partition_by):
            return False
        self._table = txn.commit_transaction()
        return True

    def ensure_table(self) -> Table:
        """The table, created (with no snapshot) if it does not exist yet."""
        return self.load(refresh=False) or self._create()

    def _create(self) -> Table:
        ns = self.identifier[:-1]
        try:
            self.catalog.create_namespace(ns)
        except NamespaceAlreadyExistsError:
            pass
        except Exception:
            # two topics' first commits create the namespace at once: a SQL catalog
            # raises its driver's unique-key error, not NamespaceAlreadyExistsError
            if not self.catalog.namespace_exists(ns):
                raise
        try:
            self._table = self.catalog.create_table(
                self.identifier,
                schema=base_arrow_schema(self.cfg),
                properties={
                    TOPIC_PROPERTY: self.cfg.topic,
                    "write.target-file-size-bytes": str(self.target_file_size),
                    "format-version": "2",
                },
            )
        except TableAlreadyExistsError:
            self._table = self.catalog.load_table(self.identifier)
        return self._table

    # ------------------------------------------------------------ planning
    def check_schemas(self, schemas: list[pa.Schema]) -> list[str | None]:
        """Per schema: None if it can be merged into the table (in order), else why not."""
        table = self.load(refresh=False)
        current: Schema
        if table is None:
            current = Schema()
            try:
                current = check_compatible(current, base_arrow_schema(self.cfg))
            except SchemaEvolutionError:
                pass
        else:
            current = table.schema()
        out: list[str | None] = []
        for s in schemas:
            try:
                current = check_compatible(current, s)
                out.append(None)
            except SchemaEvolutionError as exc:
                out.append(str(exc))
        return out

    # ------------------------------------------------------------- commit
    def commit(
        self,
        tables: list[pa.Table],
        offsets: dict[int, int],
        extra_properties: dict[str, str] | None = None,
    ) -> CommitResult:
        """One snapshot with ``tables`` and ``offsets``; re-planned if a concurrent writer
        (Spark compaction) changed the files a keyed commit's deletes point at."""
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                return self._commit_once(tables, offsets, extra_properties)
            except ConcurrentWriterError:
                raise
            except (CommitFailedException, ValidationException) as exc:
                # both guarantee that nothing landed: plan again on the new snapshot
                if attempt == _CONFLICT_RETRIES:
                    raise
                log.info(
                    "table %s: concurrent change, re-planning the commit: %s", self.identifier, exc
                )
                self.load(refresh=True)
        raise AssertionError("unreachable")

    def _commit_once(
        self,
        tables: list[pa.Table],
        offsets: dict[int, int],
        extra_properties: dict[str, str] | None,
    ) -> CommitResult:
        table = self.load(refresh=self.cfg.keyed) or self._create()
        if self.cfg.keyed:
            table = self._wait_for_rewrite(table)
        # exactly once with more than one writer (the brokers of a cluster, a zombie):
        # the commit lands only where the table still holds, for each of its
        # partitions, the offset this writer planned from (see the module docstring)
        planned_head = committed_offsets(table, self.topic_id) or {}
        expected = {p: self._expected(p, planned_head) for p in offsets}
        planned_on: list[dict[int, int]] = []  # the head the offsets JSON was merged into

        def merged_offsets(head: Table) -> str:
            now = committed_offsets(head, self.topic_id) or {}
            moved = {p: now.get(p) for p in offsets if now.get(p) != expected[p]}
            if moved:
                raise ConcurrentWriterError(
                    f"table {'.'.join(self.identifier)}: another writer committed offsets "
                    f"{moved} since this commit was planned from "
                    f"{ {p: expected[p] for p in moved} }"
                )
            if planned_on and planned_on[0] != now and self.cfg.keyed:
                # another writer's rows may hold ids this commit replaces: plan the
                # deletes again on the new head (nothing has landed)
                raise ValidationException(
                    f"table {'.'.join(self.identifier)}: other partitions committed since "
                    "the upserts were planned"
                )
            planned_on[:] = [now]
            merged = {**now, **offsets}
            return json.dumps({str(k): v for k, v in sorted(merged.items())}, separators=(",", ":"))

        offsets_json = merged_offsets(table)  # the table may be fresher than this plan
        props = {
            OFFSETS_PROPERTY: offsets_json,
            TOPIC_PROPERTY: self.cfg.topic,
            **({TOPIC_ID_PROPERTY: self.topic_id} if self.topic_id else {}),
            **(extra_properties or {}),
        }
        table_props: list[SetPropertiesUpdate] = []

        def rebase(head: Table) -> None:
            """pyiceberg retries a refused commit on the new head: re-merge there."""
            fresh = merged_offsets(head)
            props[OFFSETS_PROPERTY] = fresh  # the summary is rebuilt from this dict
            for update in table_props:
                update.updates[OFFSETS_PROPERTY] = fresh

        txn = table.transaction()
        seen: set[str] = set()
        for t in tables:
            key = t.schema.to_string(show_field_metadata=False)
            if key in seen:
                continue
            seen.add(key)
            evolve_schema(txn, t.schema)
        evolve_spec(txn, self.cfg.partition_by)
        target = txn.table_metadata.schema().as_arrow()
        data = (
            pa.concat_tables([conform_table(clean_table(t), target) for t in tables])
            if tables
            else target.empty_table()
        )
        deleted = 0
        delta = RowDelta(txn, snapshot_properties=props)
        delta.validate_with(rebase)
        if self.cfg.keyed and data.num_rows:
            data, delete_filter, deleted, keys = _upsert_plan(data, self.cfg)
            # rows committed before the id columns existed have no id to replace
            known = set(table.schema().column_names)
            if (
                delete_filter is not None
                and table.current_snapshot() is not None
                and all(c in known for c in keys.column_names)
            ):
                found = find_position_deletes(table, delete_filter, keys)
                if found:
                    delete_files = write_position_delete_files(
                        table.io,
                        table.location_provider(),
                        found,
                        delta.commit_uuid,
                    )
                    delta.add_position_deletes(delete_files, (d.data_file for d in found))
        if data.num_rows:
            for f in _dataframe_to_data_files(
                table_metadata=txn.table_metadata,
                write_uuid=delta.commit_uuid,
                df=data,
                io=table.io,
            ):
                delta.append_data_file(f)
        delta.commit()
        txn.set_properties(
            {
                OFFSETS_PROPERTY: offsets_json,
                **({TOPIC_ID_PROPERTY: self.topic_id} if self.topic_id else {}),
            }
        )
        # the staged update itself, so that a rebase can re-merge the table property too
        table_props.extend(
            u
            for u in txn._updates
            if isinstance(u, SetPropertiesUpdate) and OFFSETS_PROPERTY in u.updates
        )
        self._fault("files_written")
        self._table = txn.commit_transaction()
        self._known.update(offsets)
        self._fault("after_commit")
        snap = self._table.current_snapshot()
        files = 0
        if snap is not None and snap.summary is not None:
            files = int(snap.summary.additional_properties.get("added-data-files", "0"))
        return CommitResult(snap.snapshot_id if snap else None, data.num_rows, files, deleted)

    def expire_snapshots(self) -> int:
        """Expire snapshots older than the configured age beyond the newest ``retain.last``."""
        table = self._table
        if table is None or not self.cfg.expire_snapshots:
            return 0
        snaps = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
        keep = {s.snapshot_id for s in snaps[-self.cfg.expire_retain_last :]}
        current = table.current_snapshot()
        if current is not None:
            keep.add(current.snapshot_id)
        cutoff = int(time.time() * 1000) - self.cfg.expire_older_than_ms
        old = [
            s.snapshot_id for s in snaps if s.snapshot_id not in keep and s.timestamp_ms < cutoff
        ]
        if not old:
            return 0
        try:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        except Exception as exc:  # best effort; the next commit tries again
            log.warning("snapshot expiry for %s failed: %s", self.identifier, exc)
            return 0
        self._table = table.refresh()
        return len(old)


def clean_table(t: pa.Table) -> pa.Table:
    """Drop null-typed columns (all-null data with no type), see evolution.clean_arrow_schema."""
    keep = [i for i, f in enumerate(t.schema) if not pa.types.is_null(f.type)]
    if len(keep) == t.num_columns:
        return t
    return t.select(keep)


def _op_column(data: pa.Table, cfg: TableTopicConfig) -> pa.Array | None:
    if cfg.cdc_from_envelope and CDC_OP in data.column_names:
        return data.column(CDC_OP).combine_chunks().cast(pa.string())
    if cfg.cdc_field and cfg.cdc_field in data.column_names:
        return data.column(cfg.cdc_field).combine_chunks().cast(pa.string())
    return None


def _balanced_or(terms: list[BooleanExpression]) -> BooleanExpression:
    """OR of many terms as a balanced tree (depth log n: no recursion limit in visitors)."""
    while len(terms) > 1:
        terms = [
            Or(*terms[i : i + 2]) if i + 1 < len(terms) else terms[i]
            for i in range(0, len(terms), 2)
        ]
    return terms[0]


def _last_per_key(data: pa.Table, keys: list[str], by: str) -> pa.Table:
    """One row per distinct ``keys``: the greatest ``by`` (then the greatest
    ``_kafka_partition``, ``_kafka_offset``), in that order of rows."""
    order = pc.sort_indices(
        data,
        sort_keys=[
            (by, "ascending"),
            ("_kafka_partition", "ascending"),
            ("_kafka_offset", "ascending"),
        ],
    )
    data = data.take(order)
    data = data.append_column("__pos", pa.array(range(data.num_rows), pa.int64()))
    last = data.group_by(keys, use_threads=False).aggregate([("__pos", "max")])
    keep = pc.sort_indices(last.column("__pos_max"))
    return data.take(last.column("__pos_max").take(keep)).drop_columns(["__pos"])


def _upsert_plan(
    data: pa.Table, cfg: TableTopicConfig
) -> tuple[pa.Table, BooleanExpression | None, int, pa.Table]:
    """Dedupe by id in Kafka's order; the filter and the distinct non-null ids (one column
    per id column) that find the ids' old rows.

    Kafka orders records by offset within a partition only, so the last row of an id is
    the one with the highest offset in its partition (timestamps are set by producers and
    may go backwards). Across commits the later commit covers later offsets of every
    partition, so replacing older rows gives the same answer however records were
    batched. One id in several partitions has no Kafka order: each partition's last row
    of it competes and the later ``_kafka_timestamp`` (then the higher partition) wins.
    """
    ids = list(cfg.id_columns)
    missing = [c for c in ids if c not in data.column_names]
    if missing:
        raise TableTopicError(f"table.topic.id.columns {missing} are not columns of the table")
    data = _last_per_key(data, [*ids, "_kafka_partition"], "_kafka_offset")
    data = _last_per_key(data, ids, "_kafka_timestamp")
    ops = _op_column(data, cfg)
    keys = data.select(ids)
    for c in ids:
        keys = keys.filter(pc.is_valid(keys.column(c)))
    id_values = [data.column(c).to_pylist() for c in ids]
    rows_ids = [tuple(v[i] for v in id_values) for i in range(data.num_rows)]
    rows_ids = [r for r in rows_ids if all(x is not None for x in r)]
    delete_filter: BooleanExpression | None = None
    if rows_ids:
        if len(ids) == 1:
            delete_filter = In(ids[0], {r[0] for r in rows_ids})  # type: ignore[call-arg,arg-type]
        else:
            terms: list[BooleanExpression] = [
                reduce(And, [EqualTo(c, v) for c, v in zip(ids, r, strict=True)])  # type: ignore[arg-type,call-arg]
                for r in rows_ids
            ]
            delete_filter = _balanced_or(terms)
    deleted = 0
    if ops is not None:
        is_delete = pc.is_in(ops, value_set=pa.array(sorted(_DELETE_OPS)))
        is_delete = pc.fill_null(is_delete, False)
        deleted = pc.sum(is_delete).as_py() or 0
        data = data.filter(pc.invert(is_delete))
    return data, delete_filter, deleted, keys
