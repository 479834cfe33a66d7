"""Cast an Arrow table to a target schema by field name, recursively.

Fields the data lacks become nulls (a column dropped from the record schema
stays in the table); nested structs, lists and maps are matched by name;
primitive types are cast (int -> long, float -> double, decimal widening).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["conform_table", "conform_array"]


def _combine(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def conform_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pa.types.is_struct(target):
        if not pa.types.is_struct(arr.type):
            raise TypeError(f"cannot store {arr.type} in a struct column")
        names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = []
        for i in range(target.num_fields):
            f = target.field(i)
            if f.name in names:
                child = arr.field(names[f.name])
                children.append(conform_array(child, f.type))
            else:
                children.append(pa.nulls(len(arr), f.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise TypeError(f"cannot store {arr.type} in a list column")
        values = conform_array(arr.flatten(), target.value_type)
        offsets = arr.offsets
        if arr.offset or len(arr.values) != len(arr.flatten()):
            # a sliced list: rebuild from the visible range
            arr = pa.concat_arrays([arr])
            offsets = arr.offsets
            values = conform_array(arr.flatten(), target.value_type)
        mask = arr.is_null() if arr.null_count else None
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        if pa.types.is_large_list(target) and offsets.type != pa.int64():
            offsets = offsets.cast(pa.int64())
        if not pa.types.is_large_list(target) and offsets.type != pa.int32():
            offsets = offsets.cast(pa.int32())
        out = cls.from_arrays(offsets, values, mask=mask)
        return out.cast(target) if out.type != target else out
    if pa.types.is_map(target):
        if not pa.types.is_map(arr.type):
            raise TypeError(f"cannot store {arr.type} in a map column")
        arr = pa.concat_arrays([arr]) if arr.offset else arr
        keys = conform_array(arr.keys, target.key_type)
        items = conform_array(arr.items, target.item_type)
        mask = arr.is_null() if arr.null_count else None
        out = pa.MapArray.from_arrays(arr.offsets, keys, items, mask=mask)
        return out.cast(target) if out.type != target else out
    return arr.cast(target)


def conform_table(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` with exactly ``target``'s fields (by name; missing ones null)."""
    arrays = []
    names = set(table.column_names)
    for f in target:
        if f.name in names:
            arrays.append(conform_array(_combine(table.column(f.name)), f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=target)
