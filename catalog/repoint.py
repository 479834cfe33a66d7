"""Point an existing table of a SQL catalog at another metadata file, in one step.

pyiceberg's ``SqlCatalog.register_table`` refuses ``overwrite``, and dropping
then registering again leaves a moment in which readers find no table. The
catalog row is updated in place instead: one ``UPDATE`` in one database
transaction, so a reader sees either the old or the new metadata file.
"""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

__all__ = ["repoint_sql_table"]


def repoint_sql_table(
    catalog: SqlCatalog,
    identifier: tuple[str, ...],
    new_location: str,
    *,
    expected: str | None = None,
) -> str:
    """Move ``identifier``'s metadata pointer to ``new_location``; return the old one.

    With ``expected`` the move happens only if the pointer is still there
    (compare-and-set), else ``CommitFailedException``. ``NoSuchTableError``
    if the catalog has no such table.
    """
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select, update
    from sqlalchemy.orm import Session

    where = (
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == Catalog.namespace_to_string(identifier[:-1]),
        IcebergTables.table_name == identifier[-1],
    )
    name = ".".join(identifier)
    with Session(catalog.engine) as session, session.begin():
        current = session.scalar(select(IcebergTables.metadata_location).where(*where))
        if current is None:
            raise NoSuchTableError(f"Table does not exist: {name}")
        if expected is not None and current != expected:
            raise CommitFailedException(f"Table {name} was changed by another writer")
        result = session.execute(
            update(IcebergTables)
            .where(*where, IcebergTables.metadata_location == current)
            .values(metadata_location=new_location, previous_metadata_location=current)
        )
        if result.rowcount < 1:  # type: ignore[attr-defined]
            raise CommitFailedException(f"Table {name} was changed by another writer")
    return current
