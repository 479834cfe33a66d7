"""Dropping a table, and purging its files, even when some of them are already gone.

pyiceberg's ``purge_table`` loads the table first and reads every manifest
list, so a missing metadata file (or manifest list) fails the whole request,
and can do so after the catalog entry is already dropped. Here the entry is
dropped whenever the table is listed, and purging deletes what can still be
found: the files the newest readable metadata file references (the current
one, or the previous one the SQL catalog records when the current is lost).
Files only the lost metadata knew about stay behind and are logged.
"""

from __future__ import annotations

import logging

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata

__all__ = ["drop_table"]

_log = logging.getLogger(__name__)
# What reading a missing, truncated or foreign metadata/manifest file raises.
_UNREADABLE = (OSError, ValueError)


def drop_table(catalog: Catalog, identifier: tuple[str, ...], *, purge: bool) -> None:
    """Drop ``identifier``; with ``purge`` also delete the files that can be found.

    Raises ``NoSuchTableError`` only when the catalog does not list the table.
    """
    if not purge:
        catalog.drop_table(identifier)
        return
    found = _readable_metadata(catalog, identifier)
    catalog.drop_table(identifier)
    if found is None:
        _log.warning(
            "purge of %s: no readable metadata file, only the catalog entry was dropped",
            ".".join(identifier),
        )
        return
    location, metadata, lost = found
    io = load_file_io(dict(catalog.properties), location)
    _purge(io, metadata, location)
    if lost is not None:
        _log.warning(
            "purge of %s: metadata file %s is gone; files only it referenced are left",
            ".".join(identifier),
            lost,
        )


def _readable_metadata(
    catalog: Catalog, identifier: tuple[str, ...]
) -> tuple[str, TableMetadata, str | None] | None:
    """(location, metadata, lost current location or None) of the newest readable file."""
    try:
        table = catalog.load_table(identifier)
        return table.metadata_location, table.metadata, None
    except _UNREADABLE as exc:
        current_error = exc
    current, previous = _recorded_locations(catalog, identifier)
    _log.warning("table %s: cannot read its metadata: %s", ".".join(identifier), current_error)
    if previous:
        try:
            io = load_file_io(dict(catalog.properties), previous)
            return previous, FromInputFile.table_metadata(io.new_input(previous)), current
        except _UNREADABLE:
            pass
    return None


def _recorded_locations(
    catalog: Catalog, identifier: tuple[str, ...]
) -> tuple[str | None, str | None]:
    """The current and previous metadata locations the catalog records, where it can tell."""
    if not isinstance(catalog, SqlCatalog):
        return None, None
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    with Session(catalog.engine) as session:
        row = session.scalar(
            select(IcebergTables).where(
                IcebergTables.catalog_name == catalog.name,
                IcebergTables.table_namespace == Catalog.namespace_to_string(identifier[:-1]),
                IcebergTables.table_name == identifier[-1],
            )
        )
        if row is None:
            return None, None
        return row.metadata_location, row.previous_metadata_location


def _delete(io: FileIO, path: str, kind: str) -> None:
    try:
        io.delete(path)
    except OSError as exc:
        _log.debug("purge: %s file %s not deleted: %s", kind, path, exc)


def _purge(io: FileIO, metadata: TableMetadata, location: str) -> None:
    data_files: set[str] = set()
    manifests: set[str] = set()
    manifest_lists: set[str] = set()
    for snapshot in metadata.snapshots:
        manifest_lists.add(snapshot.manifest_list)
        try:
            snapshot_manifests = snapshot.manifests(io)
        except _UNREADABLE as exc:
            _log.warning("purge: manifest list %s unreadable: %s", snapshot.manifest_list, exc)
            continue
        for manifest in snapshot_manifests:
            if manifest.manifest_path in manifests:
                continue
            manifests.add(manifest.manifest_path)
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except _UNREADABLE as exc:
                _log.warning("purge: manifest %s unreadable: %s", manifest.manifest_path, exc)
                continue
            data_files.update(entry.data_file.file_path for entry in entries)
    for path in sorted(data_files):
        _delete(io, path, "data")
    for path in sorted(manifests):
        _delete(io, path, "manifest")
    for path in sorted(manifest_lists):
        _delete(io, path, "manifest list")
    for log_entry in metadata.metadata_log:
        _delete(io, log_entry.metadata_file, "metadata")
    _delete(io, location, "metadata")
