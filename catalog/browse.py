"""Browsing queries over the platform catalog, shared by the HTTP admin API and the CLI.

Every function takes a pyiceberg :class:`~pyiceberg.catalog.Catalog` and returns
plain pydantic models that serialize to JSON. Unknown namespaces or tables raise
pyiceberg's ``NoSuchNamespaceError`` / ``NoSuchTableError``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from typing import Any

from pydantic import BaseModel, Field
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table
from pyiceberg.types import ListType, MapType, NestedField, StructType

__all__ = [
    "MAX_PREVIEW_ROWS",
    "FileStats",
    "NamespaceInfo",
    "Preview",
    "SnapshotInfo",
    "TableDescription",
    "TableRef",
    "describe_table",
    "file_stats",
    "list_namespaces",
    "list_tables",
    "namespace_info",
    "parse_identifier",
    "preview_rows",
    "snapshots",
]

MAX_PREVIEW_ROWS = 1000


class NamespaceInfo(BaseModel):
    namespace: list[str]
    name: str = Field(description="Levels joined with '.'")
    properties: dict[str, str] = Field(default_factory=dict)


class TableRef(BaseModel):
    namespace: list[str]
    name: str
    identifier: str = Field(description="namespace.name")


class FieldInfo(BaseModel):
    id: int
    name: str
    type: str
    required: bool
    doc: str | None = None
    fields: list[FieldInfo] = Field(default_factory=list, description="Nested fields")


class PartitionFieldInfo(BaseModel):
    field_id: int
    name: str
    source_id: int
    source_name: str | None
    transform: str


class SortFieldInfo(BaseModel):
    source_id: int
    source_name: str | None
    transform: str
    direction: str
    null_order: str


class TableDescription(BaseModel):
    identifier: str
    namespace: list[str]
    name: str
    table_uuid: str
    format_version: int
    location: str
    metadata_location: str
    last_updated_ms: int
    schema_id: int
    fields: list[FieldInfo]
    identifier_field_ids: list[int]
    partition_spec_id: int
    partition_fields: list[PartitionFieldInfo]
    sort_order_id: int
    sort_fields: list[SortFieldInfo]
    properties: dict[str, str]
    current_snapshot_id: int | None
    snapshot_count: int


class SnapshotInfo(BaseModel):
    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int | None
    timestamp_ms: int
    timestamp: str
    operation: str | None
    schema_id: int | None
    manifest_list: str
    summary: dict[str, str]
    current: bool


class FileInfo(BaseModel):
    content: str = Field(description="data, position-deletes or equality-deletes")
    file_path: str
    file_format: str
    spec_id: int | None
    partition: dict[str, Any]
    record_count: int
    file_size_in_bytes: int


class FileStats(BaseModel):
    snapshot_id: int | None
    data_files: int
    data_records: int
    data_bytes: int
    position_delete_files: int
    equality_delete_files: int
    delete_records: int
    delete_bytes: int
    files: list[FileInfo]


class Preview(BaseModel):
    columns: list[str]
    types: list[str]
    rows: list[dict[str, Any]]
    limit: int
    snapshot_id: int | None


def parse_identifier(identifier: str) -> tuple[str, ...]:
    """``ns.sub.table`` -> ``("ns", "sub", "table")``; at least namespace and name."""
    parts = tuple(identifier.split("."))
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"Invalid table identifier {identifier!r}: expected namespace.table")
    return parts


def list_namespaces(
    catalog: Catalog, parent: tuple[str, ...] = (), recursive: bool = True
) -> list[NamespaceInfo]:
    """Namespaces under ``parent`` (all levels when ``recursive``), sorted."""
    if parent and not catalog.namespace_exists(parent):
        raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(parent)}")
    out: list[NamespaceInfo] = []
    pending = [tuple(n) for n in catalog.list_namespaces(parent)]
    while pending:
        ns = pending.pop(0)
        out.append(NamespaceInfo(namespace=list(ns), name=".".join(ns)))
        if recursive:
            children = [tuple(n) for n in catalog.list_namespaces(ns)]
            pending.extend(c for c in children if c != ns and len(c) > len(ns))
    return sorted(out, key=lambda n: n.namespace)


def namespace_info(catalog: Catalog, namespace: tuple[str, ...]) -> NamespaceInfo:
    props = catalog.load_namespace_properties(namespace)
    return NamespaceInfo(
        namespace=list(namespace), name=".".join(namespace), properties=dict(props)
    )


def list_tables(catalog: Catalog, namespace: tuple[str, ...]) -> list[TableRef]:
    idents = sorted(tuple(i) for i in catalog.list_tables(namespace))
    return [TableRef(namespace=list(i[:-1]), name=i[-1], identifier=".".join(i)) for i in idents]


def _field(field: NestedField) -> FieldInfo:
    return FieldInfo(
        id=field.field_id,
        name=field.name,
        type=_type_name(field.field_type),
        required=field.required,
        doc=field.doc,
        fields=_children(field.field_type),
    )


def _type_name(field_type: Any) -> str:
    if isinstance(field_type, StructType):
        return "struct"
    if isinstance(field_type, ListType):
        return "list"
    if isinstance(field_type, MapType):
        return "map"
    return str(field_type)


def _children(field_type: Any) -> list[FieldInfo]:
    if isinstance(field_type, StructType):
        return [_field(f) for f in field_type.fields]
    if isinstance(field_type, ListType):
        return [_field(field_type.element_field)]
    if isinstance(field_type, MapType):
        return [_field(field_type.key_field), _field(field_type.value_field)]
    return []


def describe_table(catalog: Catalog, identifier: tuple[str, ...]) -> TableDescription:
    table = catalog.load_table(identifier)
    meta = table.metadata
    schema = table.schema()
    spec = table.spec()
    order = table.sort_order()

    def source_name(source_id: int) -> str | None:
        return schema.find_column_name(source_id)

    return TableDescription(
        identifier=".".join(identifier),
        namespace=list(identifier[:-1]),
        name=identifier[-1],
        table_uuid=str(meta.table_uuid),
        format_version=meta.format_version,
        location=meta.location,
        metadata_location=table.metadata_location,
        last_updated_ms=meta.last_updated_ms,
        schema_id=schema.schema_id,
        fields=[_field(f) for f in schema.fields],
        identifier_field_ids=list(schema.identifier_field_ids),
        partition_spec_id=spec.spec_id,
        partition_fields=[
            PartitionFieldInfo(
                field_id=f.field_id,
                name=f.name,
                source_id=f.source_id,
                source_name=source_name(f.source_id),
                transform=str(f.transform),
            )
            for f in spec.fields
        ],
        sort_order_id=order.order_id,
        sort_fields=[
            SortFieldInfo(
                source_id=f.source_id,
                source_name=source_name(f.source_id),
                transform=str(f.transform),
                direction=str(f.direction.value),
                null_order=str(f.null_order.value),
            )
            for f in order.fields
        ],
        properties=dict(meta.properties),
        current_snapshot_id=meta.current_snapshot_id,
        snapshot_count=len(meta.snapshots),
    )


def snapshots(catalog: Catalog, identifier: tuple[str, ...]) -> list[SnapshotInfo]:
    """The table's snapshots, newest first, with their summaries."""
    table = catalog.load_table(identifier)
    current = table.metadata.current_snapshot_id
    out = []
    for snap in table.metadata.snapshots:
        summary = snap.summary
        operation = summary.operation.value if summary is not None else None
        details: dict[str, str] = {}
        if summary is not None:
            details = {k: str(v) for k, v in summary.additional_properties.items()}
        out.append(
            SnapshotInfo(
                snapshot_id=snap.snapshot_id,
                parent_snapshot_id=snap.parent_snapshot_id,
                sequence_number=snap.sequence_number,
                timestamp_ms=snap.timestamp_ms,
                timestamp=dt.datetime.fromtimestamp(snap.timestamp_ms / 1000, dt.UTC).isoformat(),
                operation=operation,
                schema_id=snap.schema_id,
                manifest_list=snap.manifest_list,
                summary=details,
                current=snap.snapshot_id == current,
            )
        )
    return sorted(out, key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True)


_CONTENT = {
    DataFileContent.DATA: "data",
    DataFileContent.POSITION_DELETES: "position-deletes",
    DataFileContent.EQUALITY_DELETES: "equality-deletes",
}


def file_stats(
    catalog: Catalog, identifier: tuple[str, ...], snapshot_id: int | None = None
) -> FileStats:
    """Live data and delete files of a snapshot (the current one by default)."""
    table = catalog.load_table(identifier)
    snap = (
        table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    )
    if snapshot_id is not None and snap is None:
        raise ValueError(f"Snapshot {snapshot_id} does not exist")
    stats = FileStats(
        snapshot_id=snap.snapshot_id if snap else None,
        data_files=0,
        data_records=0,
        data_bytes=0,
        position_delete_files=0,
        equality_delete_files=0,
        delete_records=0,
        delete_bytes=0,
        files=[],
    )
    if snap is None:
        return stats
    specs = table.metadata.specs()
    for manifest in snap.manifests(table.io):
        spec = specs.get(manifest.partition_spec_id)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            df = entry.data_file
            partition = {}
            if spec is not None:
                partition = {f.name: _jsonable(df.partition[i]) for i, f in enumerate(spec.fields)}
            info = FileInfo(
                content=_CONTENT.get(df.content, str(df.content)),
                file_path=df.file_path,
                file_format=str(
                    df.file_format.value if hasattr(df.file_format, "value") else df.file_format
                ),
                spec_id=manifest.partition_spec_id,
                partition=partition,
                record_count=df.record_count,
                file_size_in_bytes=df.file_size_in_bytes,
            )
            stats.files.append(info)
            if df.content == DataFileContent.DATA:
                stats.data_files += 1
                stats.data_records += df.record_count
                stats.data_bytes += df.file_size_in_bytes
            else:
                if df.content == DataFileContent.POSITION_DELETES:
                    stats.position_delete_files += 1
                else:
                    stats.equality_delete_files += 1
                stats.delete_records += df.record_count
                stats.delete_bytes += df.file_size_in_bytes
    stats.files.sort(key=lambda f: (f.content, f.file_path))
    return stats


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def preview_rows(catalog: Catalog, identifier: tuple[str, ...], limit: int = 20) -> Preview:
    """Up to ``limit`` rows of the current snapshot, read with pyarrow."""
    if limit < 1 or limit > MAX_PREVIEW_ROWS:
        raise ValueError(f"limit must be between 1 and {MAX_PREVIEW_ROWS}")
    table: Table = catalog.load_table(identifier)
    arrow = table.scan(limit=limit).to_arrow().slice(0, limit)
    rows = [{k: _jsonable(v) for k, v in row.items()} for row in arrow.to_pylist()]
    return Preview(
        columns=list(arrow.schema.names),
        types=[str(t) for t in arrow.schema.types],
        rows=rows,
        limit=limit,
        snapshot_id=table.metadata.current_snapshot_id,
    )
