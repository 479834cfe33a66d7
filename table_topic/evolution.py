"""Table schema evolution from record schemas (pyiceberg ``union_by_name``).

Accepted (merged into the table before its files are committed): new columns,
also nested in structs, lists and maps; int -> long; float -> double; decimal
precision widening; a column missing from newer records stays (filled with
nulls). Value columns are written optional, so required -> optional needs no
change. Anything else (string -> int, a struct becoming a primitive, decimal
scale changes...) is an incompatible change: :class:`SchemaEvolutionError`,
and the records with that schema go down the errors-tolerance path.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction

from table_topic.errors import SchemaEvolutionError

__all__ = ["clean_arrow_schema", "evolve_schema", "check_compatible"]


def _clean_type(t: pa.DataType) -> pa.DataType | None:
    if pa.types.is_null(t):
        return None
    if pa.types.is_struct(t):
        fields = []
        for i in range(t.num_fields):
            f = t.field(i)
            ct = _clean_type(f.type)
            if ct is not None:
                fields.append(pa.field(f.name, ct, nullable=True))
        return pa.struct(fields) if fields else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = _clean_type(t.value_type)
        return pa.list_(vt) if vt is not None else None
    if pa.types.is_map(t):
        it = _clean_type(t.item_type)
        return pa.map_(t.key_type, it) if it is not None else None
    return t


def clean_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The schema Iceberg can hold: null-typed fields (all-null data) dropped, all optional."""
    fields = []
    for f in schema:
        t = _clean_type(f.type)
        if t is not None:
            fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)


def check_compatible(current: Schema, incoming: pa.Schema) -> Schema:
    """The schema ``current`` would become; raises SchemaEvolutionError if incompatible."""
    from types import SimpleNamespace

    from pyiceberg.table.update.schema import UpdateSchema

    # A detached update: pyiceberg only reads the specs and schema ids from the transaction.
    stub = SimpleNamespace(table_metadata=SimpleNamespace(partition_specs=[], schemas=[current]))
    try:
        update = UpdateSchema(transaction=stub, schema=current)  # type: ignore[arg-type]
        update.union_by_name(clean_arrow_schema(incoming))
        return update._apply()
    except Exception as exc:  # pyiceberg raises ValueError / ValidationError / ResolveError
        raise SchemaEvolutionError(f"incompatible schema change: {exc}") from exc


def evolve_schema(txn: Transaction, incoming: pa.Schema) -> bool:
    """Merge ``incoming`` into the transaction's table schema; True if it changed."""
    before = txn.table_metadata.schema()
    merged = check_compatible(before, incoming)
    if merged.as_struct() == before.as_struct():
        return False
    try:
        with txn.update_schema() as update:
            update.union_by_name(clean_arrow_schema(incoming))
    except Exception as exc:
        raise SchemaEvolutionError(f"incompatible schema change: {exc}") from exc
    return True
