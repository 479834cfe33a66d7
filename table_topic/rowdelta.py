"""Merge-on-read upserts: position delete files plus new rows in ONE Iceberg snapshot.

A keyed commit (upsert or CDC) must hide the rows its ids replace. Rewriting the
files that hold them (copy-on-write) costs a full file rewrite per commit; instead
we find the replaced rows' positions, write Iceberg v2 *position delete* files
(``file_path``, ``pos``) in the partition of the data file they point at, and commit
them with the new data files as one ``overwrite`` snapshot. Spark (Iceberg 1.x),
Trino and pyiceberg all apply position deletes when they read; Spark's
``rewrite_position_delete_files`` and ``rewrite_data_files`` fold them away.

pyiceberg 0.12 writes data files only, so the delete-file writer and the snapshot
producer that adds a delete manifest are ours; they ride on pyiceberg's manifest
and manifest-list writers, its statistics and its commit/retry machinery.

Concurrency: a position delete is only right while the data file it names is live.
If a concurrent writer (Spark compaction) removed one of those files between our
planning and our commit, the commit is refused with ``ValidationException`` and the
caller plans again on the new snapshot.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io.pyarrow import (
    _read_deletes,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import (
    Operation,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.table.update.validate import _validate_data_files_exist
from pyiceberg.typedef import EMPTY_DICT, Record
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.utils.concurrent import ExecutorFactory

__all__ = [
    "DELETE_FILE_SCHEMA",
    "PositionDeletes",
    "RowDelta",
    "find_position_deletes",
    "write_position_delete_files",
]

# Reserved field ids of the Iceberg spec's position delete files.
FILE_PATH_ID = 2147483546
POS_ID = 2147483545
DELETE_FILE_SCHEMA = Schema(
    NestedField(FILE_PATH_ID, "file_path", StringType(), required=True),
    NestedField(POS_ID, "pos", LongType(), required=True),
)
_ARROW_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
    ]
)


@dataclass
class PositionDeletes:
    """Rows of one live data file that a commit deletes (sorted, not yet deleted)."""

    data_file: DataFile
    positions: pa.Array


# ---------------------------------------------------------------------------- planning
def _already_deleted(
    io: Any, delete_files: Iterable[DataFile], path: str, cache: dict[str, dict[str, pa.ChunkedArray]]
) -> pa.Array | None:
    chunks: list[pa.Array] = []
    for df in delete_files:
        if df.content != DataFileContent.POSITION_DELETES:
            continue  # equality deletes never come from us; they do not change positions
        if df.file_path not in cache:
            cache[df.file_path] = _read_deletes(io, df)
        hit = cache[df.file_path].get(path)
        if hit is not None:
            chunks.extend(hit.chunks)
    if not chunks:
        return None
    return pa.concat_arrays([c.cast(pa.int64()) for c in chunks])


def _positions_in_file(io: Any, path: str, keys: pa.Table) -> pa.Array | None:
    """Row positions in the Parquet file at ``path`` whose id columns equal a row of ``keys``."""
    ids = keys.column_names
    with io.new_input(path).open() as fi:
        pf = pq.ParquetFile(fi)
        names = set(pf.schema_arrow.names)
        if not all(c in names for c in ids):
            return None  # written before an id column existed: those rows have no id
        cols = pf.read(columns=ids, use_threads=False)
    if cols.num_rows == 0:
        return None
    arrays = []
    for c in ids:
        col = cols.column(c)
        want = keys.schema.field(c).type
        arrays.append(col if col.type == want else col.cast(want))
    file_keys = pa.table(arrays + [pa.array(range(cols.num_rows), pa.int64())], names=[*ids, "__pos"])
    if len(ids) == 1:
        mask = pc.is_in(file_keys.column(0), value_set=keys.column(0).combine_chunks())
        hit = file_keys.column("__pos").filter(mask)
    else:
        hit = file_keys.join(keys, keys=ids, join_type="inner", use_threads=False).column("__pos")
    if len(hit) == 0:
        return None
    return _sorted(hit)


def _sorted(arr: pa.ChunkedArray | pa.Array) -> pa.Array:
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    return a.take(pc.array_sort_indices(a)).cast(pa.int64())


def find_position_deletes(
    table: Table, row_filter: BooleanExpression, keys: pa.Table
) -> list[PositionDeletes]:
    """The live rows of ``table`` whose ids are in ``keys`` (one column per id column).

    Files are pruned by partition and column bounds through ``row_filter`` (the
    same ids as an Iceberg expression); only the id columns of the rest are read.
    Rows already deleted by an earlier position delete are left out.
    """
    if table.current_snapshot() is None or keys.num_rows == 0:
        return []
    tasks = list(table.scan(row_filter=row_filter, selected_fields=tuple(keys.column_names)).plan_files())
    if not tasks:
        return []
    io = table.io
    cache: dict[str, dict[str, pa.ChunkedArray]] = {}

    def one(task: Any) -> PositionDeletes | None:
        path = task.file.file_path
        hit = _positions_in_file(io, path, keys)
        if hit is None:
            return None
        gone = _already_deleted(io, task.delete_files, path, cache) if task.delete_files else None
        if gone is not None and len(gone):
            hit = hit.filter(pc.invert(pc.is_in(hit, value_set=gone)))
        if len(hit) == 0:
            return None
        return PositionDeletes(task.file, hit)

    # the delete-file cache is filled from worker threads: plain dict writes of
    # whole values are safe; a file read twice by a race costs time, not correctness
    executor = ExecutorFactory.get_or_create()
    return [r for r in executor.map(one, tasks) if r is not None]


# ---------------------------------------------------------------------------- writing
def write_position_delete_files(
    io: Any, location_provider: Any, deletes: list[PositionDeletes], write_uuid: uuid.UUID
) -> list[DataFile]:
    """One position delete file per (spec, partition) of the data files ``deletes`` name."""
    groups: dict[tuple[int, Record], list[PositionDeletes]] = defaultdict(list)
    for d in deletes:
        groups[(d.data_file.spec_id, d.data_file.partition)].append(d)
    # full bounds on file_path (as Iceberg's Java writers keep them): a reader sees from
    # lower == upper that a delete file names one data file and skips it for the others
    stats_plan = compute_statistics_plan(DELETE_FILE_SCHEMA, {"write.metadata.metrics.default": "full"})
    id_mapping = parquet_path_to_id_mapping(DELETE_FILE_SCHEMA)
    out: list[DataFile] = []
    for n, ((spec_id, partition), items) in enumerate(sorted(groups.items(), key=_group_order)):
        items.sort(key=lambda d: d.data_file.file_path)
        paths = pa.concat_arrays(
            [pa.array([d.data_file.file_path] * len(d.positions), pa.string()) for d in items]
        )
        positions = pa.concat_arrays([d.positions for d in items])
        arrow = pa.Table.from_arrays([paths, positions], schema=_ARROW_DELETE_SCHEMA)
        path = location_provider.new_data_location(f"{write_uuid}-deletes-{n:05d}.parquet")
        fo = io.new_output(path)
        with fo.create(overwrite=True) as fos:
            with pq.ParquetWriter(fos, schema=_ARROW_DELETE_SCHEMA, compression="zstd") as writer:
                writer.write_table(arrow)
        meta = writer.writer.metadata
        stats = data_file_statistics_from_parquet_metadata(meta, stats_plan, id_mapping)
        delete_file = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=partition,
            file_size_in_bytes=len(io.new_input(path)),
            sort_order_id=None,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )
        delete_file.spec_id = spec_id
        out.append(delete_file)
    return out


def _group_order(item: tuple[tuple[int, Record], list[PositionDeletes]]) -> tuple[int, str]:
    (spec_id, partition), _ = item
    return spec_id, repr(partition)


# ---------------------------------------------------------------------------- committing
class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest whose entries are delete files (content = deletes)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(_FastAppendFiles):
    """Append data files and add position delete files in one snapshot.

    Existing manifests are carried over as a fast append does; the new delete files
    get their own delete manifest per partition spec. Before a (re)try lands, the
    data files the deletes point at must still be live.
    """

    def __init__(
        self, transaction: Transaction, snapshot_properties: dict[str, str] = EMPTY_DICT
    ) -> None:
        super().__init__(
            Operation.APPEND,
            transaction,
            transaction._table.io,
            snapshot_properties=snapshot_properties,
        )
        self._added_delete_files: list[DataFile] = []
        self._referenced: set[DataFile] = set()
        self._checks: list[Callable[[Table], None]] = []

    def validate_with(self, check: Callable[[Table], None]) -> None:
        """Run ``check(refreshed table)`` before a retry lands on a newer snapshot;
        it raises to refuse the commit."""
        self._checks.append(check)

    def add_position_deletes(self, delete_files: list[DataFile], referenced: Iterable[DataFile]) -> None:
        self._added_delete_files.extend(delete_files)
        self._referenced.update(referenced)
        if self._added_delete_files:
            self._operation = Operation.OVERWRITE

    def _validate_concurrency(self) -> None:
        if self._commit_window is None or self._commit_window.is_empty():
            return
        for check in self._checks:
            check(self._transaction._table)
        if not self._referenced:
            return
        head = self._commit_window.head
        if head is None:
            return
        _validate_data_files_exist(
            self._transaction._table, head, self._referenced, self._commit_window.base
        )

    def _manifests(self) -> list[ManifestFile]:
        manifests = super()._manifests()
        by_spec: dict[int, list[DataFile]] = defaultdict(list)
        for f in self._added_delete_files:
            by_spec[f.spec_id].append(f)
        for spec_id, files in sorted(by_spec.items()):
            writer = _DeleteManifestWriter(
                self.spec(spec_id),
                self.schema(),
                self.new_manifest_output(),
                self._snapshot_id,
                self._compression,
            )
            with writer:
                for f in files:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        meta = self._transaction.table_metadata
        schema = meta.schema()
        specs = meta.specs()
        ssc = SnapshotSummaryCollector()
        for f in self._added_data_files:
            ssc.add_file(f, schema=schema, partition_spec=meta.spec())
        for f in self._added_delete_files:
            ssc.add_file(f, schema=schema, partition_spec=specs[f.spec_id])
        parent = meta.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id else None
        return update_snapshot_summaries(
            summary=Summary(operation=self._operation, **ssc.build(), **snapshot_properties),
            previous_summary=parent.summary if parent is not None else None,
        )
