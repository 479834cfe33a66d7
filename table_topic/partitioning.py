"""``table.topic.partition.by`` as an Iceberg partition spec, and evolving the spec."""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)

from table_topic.config import PartitionField
from table_topic.errors import TableTopicConfigError

__all__ = ["evolve_spec", "transform_of"]


def transform_of(f: PartitionField) -> Transform:  # type: ignore[type-arg]
    if f.transform == "identity":
        return IdentityTransform()
    if f.transform == "year":
        return YearTransform()
    if f.transform == "month":
        return MonthTransform()
    if f.transform == "day":
        return DayTransform()
    if f.transform == "hour":
        return HourTransform()
    if f.transform == "bucket":
        assert f.param is not None
        return BucketTransform(f.param)
    if f.transform == "truncate":
        assert f.param is not None
        return TruncateTransform(f.param)
    return VoidTransform()


def _has_column(schema: Schema, name: str) -> bool:
    try:
        schema.find_field(name)
    except ValueError:
        return False
    return True


def evolve_spec(txn: Transaction, wanted: tuple[PartitionField, ...]) -> bool:
    """Make the table's spec ``wanted`` (only fields whose column exists yet). True if changed."""
    meta = txn.table_metadata
    schema = meta.schema()
    spec = meta.spec()
    current = {}
    for pf in spec.fields:
        if isinstance(pf.transform, VoidTransform):
            continue
        current[pf.name] = (schema.find_column_name(pf.source_id), str(pf.transform))
    target = {}
    for f in wanted:
        if not _has_column(schema, f.column):
            continue
        target[f.name] = (f.column, str(transform_of(f)))
    if current == target:
        return False
    try:
        with txn.update_spec() as update:
            for name, desc in current.items():
                if target.get(name) != desc:
                    update.remove_field(name)
            for f in wanted:
                if f.name in target and current.get(f.name) != target[f.name]:
                    update.add_field(f.column, transform_of(f), f.name)
    except Exception as exc:
        raise TableTopicConfigError(f"table.topic.partition.by cannot be applied: {exc}") from exc
    return True
