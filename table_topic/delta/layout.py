"""``table.topic.partition.by`` as Delta partition columns.

Delta partitions by whole column values (Hive-style directories) and cannot
change a table's partition columns once it exists. So:

- ``identity(col)`` / ``col``: the top-level column itself (integers, strings,
  booleans, dates);
- ``year``, ``month``, ``day``, ``hour`` of a timestamp or date column: a derived
  column written next to the data, ``<col>_year`` (int, the calendar year),
  ``<col>_month`` (string ``YYYY-MM``), ``<col>_day`` (date), ``<col>_hour``
  (string ``YYYY-MM-DD-HH``, UTC);
- ``bucket``, ``truncate`` and ``void`` are not expressible (Iceberg's bucket
  hash has no Delta counterpart): refused with a config error, as is a change of
  the partition columns of an existing Delta table.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from table_topic.config import PartitionField
from table_topic.errors import TableTopicConfigError

__all__ = ["DeltaPartition", "delta_partitions", "partition_value"]

_DERIVED = {
    "year": pa.int32(),
    "month": pa.string(),
    "day": pa.date32(),
    "hour": pa.string(),
}
_IDENTITY_OK = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_boolean,
    pa.types.is_date,
)


@dataclass(frozen=True, slots=True)
class DeltaPartition:
    """One Delta partition column: ``source`` itself or a value derived from it."""

    name: str
    source: str
    transform: str

    @property
    def derived(self) -> bool:
        return self.transform != "identity"

    @property
    def type(self) -> pa.DataType | None:
        return _DERIVED.get(self.transform)

    def compute(self, data: pa.Table) -> pa.Array:
        col = data.column(self.source).combine_chunks()
        if self.transform == "year":
            return pc.year(col).cast(pa.int32())
        if self.transform == "day":
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
                days = pc.floor(pc.divide(col.cast(pa.float64()), 86_400_000_000.0))
                return days.cast(pa.int32()).cast(pa.date32())
            return col.cast(pa.date32())
        fmt = "%Y-%m" if self.transform == "month" else "%Y-%m-%d-%H"
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", tz="UTC"))
        return pc.strftime(col, format=fmt)


def delta_partitions(fields: tuple[PartitionField, ...]) -> list[DeltaPartition]:
    """Delta partition columns for the config; TableTopicConfigError where Delta cannot."""
    out: list[DeltaPartition] = []
    for f in fields:
        if f.transform == "identity":
            if "." in f.column:
                raise TableTopicConfigError(
                    f"table.topic.partition.by: Delta partitions by top-level columns only, "
                    f"not {f.column!r}"
                )
            out.append(DeltaPartition(f.column, f.column, "identity"))
        elif f.transform in _DERIVED:
            out.append(DeltaPartition(f.name, f.column, f.transform))
        else:
            raise TableTopicConfigError(
                f"table.topic.partition.by: {f.transform}({f.column}) has no Delta Lake "
                "equivalent (Delta tables take identity, year, month, day and hour)"
            )
    return out


def check_source(p: DeltaPartition, schema: pa.Schema) -> None:
    if p.source not in schema.names:
        raise TableTopicConfigError(
            f"table.topic.partition.by: column {p.source!r} is not in the records"
        )
    t = schema.field(p.source).type
    if p.derived and not (pa.types.is_timestamp(t) or pa.types.is_date(t)):
        raise TableTopicConfigError(
            f"table.topic.partition.by: {p.transform}({p.source}) needs a timestamp or date, "
            f"not {t}"
        )
    if not p.derived and not any(ok(t) for ok in _IDENTITY_OK):
        raise TableTopicConfigError(
            f"table.topic.partition.by: Delta cannot partition by {p.source!r} of type {t}"
        )


def partition_value(v: object) -> str | None:
    """A partition value as the Delta log writes it."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)  # ints, strings, dates (ISO)
