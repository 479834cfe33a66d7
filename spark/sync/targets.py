"""How to read, register, re-point and drop a mirrored table in each kind of catalog.

Registering uses pyiceberg's ``register_table`` everywhere. Re-pointing an existing
mirror at a newer metadata file differs:

* Glue: ``UpdateTable`` with the new ``metadata_location`` parameter, guarded by
  the Glue table's ``VersionId`` (pyiceberg's own Glue commit path);
* Hive Metastore: ``alter_table`` with the new ``metadata_location`` table parameter
  and the new schema in the storage descriptor (as pyiceberg's Hive commit does);
* SQL catalog: one ``UPDATE`` of the table's row, guarded by the old location
  (``catalog.repoint``);
* any other catalog (Iceberg REST): ``register`` with ``overwrite``, the REST
  protocol's one-step re-point. A target that refuses it keeps its old entry
  and the table is reported as an error.

Re-pointing never drops the entry first, so a reader of the target always
finds the table, at its old or its new metadata file.
"""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.serializers import FromInputFile

from catalog.repoint import repoint_sql_table
from spark.errors import CatalogSyncError

__all__ = ["MirrorTarget", "mirror_target"]


class MirrorTarget:
    """Generic target: any pyiceberg catalog."""

    kind = "generic"

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def metadata_location(self, identifier: str) -> str | None:
        try:
            return self.catalog.load_table(identifier).metadata_location
        except NoSuchTableError:
            return None

    def register(self, identifier: str, metadata_location: str) -> None:
        self.catalog.register_table(identifier, metadata_location)

    def update(self, identifier: str, old: str, new: str) -> None:
        try:
            self.catalog.register_table(identifier, new, overwrite=True)
        except NotImplementedError as exc:  # pyiceberg's answer to a 406
            raise CatalogSyncError(
                f"{self.catalog.name} cannot re-point {identifier} in one step "
                f"(register with overwrite is unsupported); it stays at {old}"
            ) from exc

    def drop(self, identifier: str) -> None:
        self.catalog.drop_table(identifier)


class SqlMirrorTarget(MirrorTarget):
    kind = "sql"
    catalog: SqlCatalog

    def update(self, identifier: str, old: str, new: str) -> None:
        ident = self.catalog.identifier_to_tuple(identifier)
        # Compare-and-set on the old location: a concurrent change is not lost.
        repoint_sql_table(self.catalog, ident, new, expected=old)


class GlueMirrorTarget(MirrorTarget):
    kind = "glue"
    catalog: GlueCatalog

    def metadata_location(self, identifier: str) -> str | None:
        database, name = self.catalog.identifier_to_database_and_table(identifier)
        try:
            table = self.catalog._get_glue_table(database, name)
        except NoSuchTableError:
            return None
        location: str | None = (table.get("Parameters") or {}).get("metadata_location")
        return location

    def update(self, identifier: str, old: str, new: str) -> None:
        from pyiceberg.catalog.glue import _construct_table_input

        database, name = self.catalog.identifier_to_database_and_table(identifier)
        glue_table = self.catalog._get_glue_table(database, name)
        metadata = FromInputFile.table_metadata(
            self.catalog._load_file_io(location=new).new_input(new)
        )
        current = (glue_table.get("Parameters") or {}).get("metadata_location")
        table_input = _construct_table_input(
            name, new, {}, metadata, glue_table=glue_table, prev_metadata_location=current
        )
        # VersionId makes a concurrent change of the Glue entry fail instead of being lost.
        self.catalog._update_glue_table(database, name, table_input, glue_table["VersionId"])


class HiveMirrorTarget(MirrorTarget):
    kind = "hive"
    catalog: HiveCatalog

    def metadata_location(self, identifier: str) -> str | None:
        database, name = self.catalog.identifier_to_database_and_table(identifier)
        try:
            with self.catalog._client as client:
                table = client.get_table(dbname=database, tbl_name=name)
        except Exception as exc:  # thrift's NoSuchObjectException
            if type(exc).__name__ == "NoSuchObjectException":
                return None
            raise
        location: str | None = (table.parameters or {}).get("metadata_location")
        return location

    def update(self, identifier: str, old: str, new: str) -> None:
        from hive_metastore.ttypes import EnvironmentContext
        from pyiceberg.catalog.hive import (
            DO_NOT_UPDATE_STATS,
            DO_NOT_UPDATE_STATS_DEFAULT,
            HIVE2_COMPATIBLE,
            HIVE2_COMPATIBLE_DEFAULT,
            _construct_hive_storage_descriptor,
        )
        from pyiceberg.utils.properties import property_as_bool

        database, name = self.catalog.identifier_to_database_and_table(identifier)
        metadata = FromInputFile.table_metadata(
            self.catalog._load_file_io(location=new).new_input(new)
        )
        with self.catalog._client as client:
            table = client.get_table(dbname=database, tbl_name=name)
            parameters = dict(table.parameters or {})
            parameters["previous_metadata_location"] = parameters.get("metadata_location", old)
            parameters["metadata_location"] = new
            table.parameters = parameters
            table.sd = _construct_hive_storage_descriptor(
                metadata.schema(),
                metadata.location,
                property_as_bool(
                    self.catalog.properties, HIVE2_COMPATIBLE, HIVE2_COMPATIBLE_DEFAULT
                ),
            )
            client.alter_table_with_environment_context(
                dbname=database,
                tbl_name=name,
                new_tbl=table,
                environment_context=EnvironmentContext(
                    properties={DO_NOT_UPDATE_STATS: DO_NOT_UPDATE_STATS_DEFAULT}
                ),
            )


def mirror_target(catalog: Catalog) -> MirrorTarget:
    """The adapter for ``catalog``'s kind."""
    if isinstance(catalog, GlueCatalog):
        return GlueMirrorTarget(catalog)
    if isinstance(catalog, HiveCatalog):
        return HiveMirrorTarget(catalog)
    if isinstance(catalog, SqlCatalog):
        return SqlMirrorTarget(catalog)
    return MirrorTarget(catalog)
