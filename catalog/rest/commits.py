"""Committing table changes: single tables, staged creates and multi-table transactions.

Requirements and updates are pyiceberg's own models; the backing catalog's
``commit_table`` validates the requirements against the current metadata,
applies the updates, writes a new metadata file and swaps the table's pointer
with a compare-and-set. A failed requirement or a lost race is a
``CommitFailedException`` (409) and leaves the table as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AssertCreate,
    TableRequirement,
    TableUpdate,
    update_table_metadata,
)

from catalog.rest.errors import IcebergHTTPError, UnsupportedOperationError, client_input
from catalog.rest.identifiers import check_namespace, check_table_name

__all__ = [
    "TableChange",
    "commit_table_change",
    "commit_transaction",
    "parse_table_change",
    "supports_multi_table_commits",
]

_REQUIREMENTS: TypeAdapter[tuple[TableRequirement, ...]] = TypeAdapter(tuple[TableRequirement, ...])
_UPDATES: TypeAdapter[tuple[TableUpdate, ...]] = TypeAdapter(tuple[TableUpdate, ...])


class _Identifier(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: list[str]
    name: str


class _CommitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    identifier: _Identifier | None = None
    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]


class TableChange:
    """One table's requirements and updates, parsed with pyiceberg's models."""

    def __init__(
        self,
        identifier: tuple[str, ...] | None,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> None:
        self.identifier = identifier
        self.requirements = requirements
        self.updates = updates

    @property
    def creates(self) -> bool:
        return any(isinstance(r, AssertCreate) for r in self.requirements)


def parse_table_change(body: Any) -> TableChange:
    """Parse a ``CommitTableRequest``; unknown requirement or update types are a 400."""
    request = _CommitRequest.model_validate(body)
    identifier = None
    if request.identifier is not None:
        namespace = check_namespace(request.identifier.namespace)
        identifier = (*namespace, check_table_name(request.identifier.name))
    with client_input("CommitTableRequest"):
        requirements = _REQUIREMENTS.validate_python(request.requirements)
        updates = _UPDATES.validate_python(request.updates)
    return TableChange(identifier, requirements, updates)


def _placeholder(catalog: Catalog, identifier: tuple[str, ...]) -> StagedTable:
    """The table argument for a commit that creates the table (``assert-create``)."""
    metadata = new_table_metadata(
        location="file:///staged",
        schema=Schema(),
        partition_spec=UNPARTITIONED_PARTITION_SPEC,
        sort_order=UNSORTED_SORT_ORDER,
        properties={},
    )
    return StagedTable(
        identifier=identifier,
        metadata=metadata,
        metadata_location="",
        io=catalog._load_file_io(),  # noqa: SLF001 - the backing catalog's FileIO
        catalog=catalog,
    )


def _current_or_placeholder(
    catalog: Catalog, identifier: tuple[str, ...], change: TableChange
) -> Table:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        if change.creates:
            if not catalog.namespace_exists(identifier[:-1]):
                raise NoSuchNamespaceError(
                    f"Namespace does not exist: {'.'.join(identifier[:-1])}"
                ) from None
            return _placeholder(catalog, identifier)
        raise


def commit_table_change(
    catalog: Catalog, identifier: tuple[str, ...], change: TableChange
) -> CommitTableResponse:
    """Apply one table's change through the backing catalog's optimistic commit."""
    if change.identifier is not None and change.identifier != identifier:
        raise IcebergHTTPError(
            400,
            "BadRequestException",
            f"Identifier in the body {'.'.join(change.identifier)} does not match the path "
            f"{'.'.join(identifier)}",
        )
    table = _current_or_placeholder(catalog, identifier, change)
    if not change.creates:
        # Check before the backing catalog writes anything, so that a stale
        # commit fails fast and the same way on every backing catalog.
        for requirement in change.requirements:
            requirement.validate(table.metadata)
    return catalog.commit_table(table, change.requirements, change.updates)


# One lock keeps two multi-table transactions of this process from interleaving
# their checks and their database transaction.
_TRANSACTION_LOCK = threading.Lock()


def supports_multi_table_commits(catalog: Catalog) -> bool:
    """Whether ``catalog`` can move several tables' pointers in one atomic step.

    Only the SQL catalog (SQLite, PostgreSQL) can: one database transaction.
    Glue, the Hive Metastore and other REST catalogs change one table per call,
    so a multi-table commit over them would be visible half done and could not
    be undone safely once another writer builds on a committed table.
    """
    return isinstance(catalog, SqlCatalog)


def _load_for_transaction(catalog: Catalog, change: TableChange) -> Table:
    assert change.identifier is not None
    try:
        return catalog.load_table(change.identifier)
    except NoSuchTableError:
        if change.creates:
            raise UnsupportedOperationError(
                "Creating tables in a multi-table transaction is not supported; "
                "create them with their own commit"
            ) from None
        raise


def _dry_run(table: Table, change: TableChange) -> TableMetadata:
    """Check the requirements and apply the updates in memory only."""
    for requirement in change.requirements:
        requirement.validate(table.metadata)
    return update_table_metadata(
        table.metadata, change.updates, metadata_location=table.metadata_location
    )


def commit_transaction(catalog: Catalog, changes: Sequence[TableChange]) -> None:
    """Commit every change or none, atomically.

    All requirements are checked and all updates applied in memory first, so a
    stale or invalid change fails the whole request before anything is written;
    then the metadata pointers of all tables move in one database transaction.
    Backing catalogs that cannot do that (see :func:`supports_multi_table_commits`)
    refuse changes to more than one table with 406 ``UnsupportedOperationException``
    and do not advertise the endpoint; a single table's change is one ordinary,
    atomic commit on every catalog.
    """
    if not changes:
        raise IcebergHTTPError(400, "BadRequestException", "table-changes must not be empty")
    seen: set[tuple[str, ...]] = set()
    for change in changes:
        if change.identifier is None:
            raise IcebergHTTPError(
                400, "BadRequestException", "Every table change needs an identifier"
            )
        if change.identifier in seen:
            raise IcebergHTTPError(
                400, "BadRequestException", f"Table {'.'.join(change.identifier)} appears twice"
            )
        seen.add(change.identifier)
    if len(changes) > 1 and not supports_multi_table_commits(catalog):
        raise UnsupportedOperationError(
            f"This catalog is backed by {type(catalog).__name__}, which cannot commit several "
            "tables atomically; commit each table on its own"
        )
    with _TRANSACTION_LOCK:
        tables = [_load_for_transaction(catalog, c) for c in changes]
        for table, change in zip(tables, changes, strict=True):
            _dry_run(table, change)
        if isinstance(catalog, SqlCatalog):
            commit_sql_transaction(catalog, tables, changes)
        else:
            (table,), (change,) = tables, changes
            catalog.commit_table(table, change.requirements, change.updates)


def commit_sql_transaction(
    catalog: SqlCatalog, tables: Sequence[Table], changes: Sequence[TableChange]
) -> None:
    """Move the pointers of several tables of a SQL catalog in one database transaction."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    staged = [
        catalog._update_and_stage_table(  # noqa: SLF001 - pyiceberg's own staging step
            table, table.name(), change.requirements, change.updates
        )
        for table, change in zip(tables, changes, strict=True)
    ]
    for stage in staged:
        catalog._write_metadata(  # noqa: SLF001
            metadata=stage.metadata, io=stage.io, metadata_path=stage.metadata_location
        )
    with Session(catalog.engine) as session:
        for table, stage in zip(tables, staged, strict=True):
            ident = table.name()
            result = session.execute(
                update(IcebergTables)
                .where(
                    IcebergTables.catalog_name == catalog.name,
                    IcebergTables.table_namespace == Catalog.namespace_to_string(ident[:-1]),
                    IcebergTables.table_name == ident[-1],
                    IcebergTables.metadata_location == table.metadata_location,
                )
                .values(
                    metadata_location=stage.metadata_location,
                    previous_metadata_location=table.metadata_location,
                )
            )
            if result.rowcount < 1:  # type: ignore[attr-defined]
                session.rollback()
                raise CommitFailedException(
                    f"Table has been updated by another process: {'.'.join(ident)}"
                )
        session.commit()
