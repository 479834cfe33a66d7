"""Bulk Avro decoding: wrap raw bodies in an Avro object container, read it columnar.

fastavro decodes about 220k records/s per core; polars' Avro reader reads a
container file ten times faster. Used for records whose fields are Avro
primitives, enums, fixed, nested records, arrays and maps of any of these,
``[null, x]`` unions of those, and the logical types carried by an int or
long (date, time-millis/micros, timestamp-millis/micros and their local
variants), a string (uuid), bytes or fixed (decimal): those are decoded as
their plain wire type (the container's schema drops the logical type) and
converted in Arrow and numpy, so polars never interprets them. Polars cannot
read maps, but a map is written exactly as an array of (string key, value)
records: the container's schema says so, and the lists of entries it reads
become Arrow maps. A reference to a named type reads as the type it names
(the schema is expanded first). Unions of several types and recursive types
take the per-record path.

Safety: a container block does not delimit its records, so a malformed body
could shift its neighbours without an error. After decoding, the encoded size
of every row is recomputed from the decoded values (vectorised: varint sizes
of zigzag longs, length prefixes of strings, 4/8 bytes for floats, 1 byte per
union branch index, an enum's symbol index, an array's block count and end
marker, nested values field by field) and compared with each body's actual length. Any
difference (a misaligned or non-canonical body) rejects the bulk result and
the caller falls back to per-record fastavro, which finds the bad records.
A union's branch index has the same size whether it is valid or not, so the
sizes also place every ``[null, x]`` union in its body, and the byte found
there must be the index of the branch the value took.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ingest.protocol.record_scan import NATIVE
from ingest.protocol.records import write_varint

if TYPE_CHECKING:
    from table_topic.decode.avro import AvroDecoder

__all__ = ["decode_bulk", "bulk_available"]

_SIMPLE = {pa.bool_(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.binary()}
_SYNC = os.urandom(16)
_BLOCK = 4096  # records per container block
_MAX_DEPTH = 8  # nested records deeper than this take the per-record path


def _header(schema_json: object) -> bytes:
    meta = {b"avro.schema": json.dumps(schema_json).encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += write_varint(len(meta))
    for k, v in meta.items():
        out += write_varint(len(k)) + k + write_varint(len(v)) + v
    out += write_varint(0)
    out += _SYNC
    return bytes(out)


def bulk_available() -> bool:
    try:
        import polars  # noqa: F401
    except ImportError:
        return False
    return True


_PRIMITIVE_NAMES = ("null", "boolean", "int", "long", "float", "double", "string", "bytes")


_THRESHOLDS = None


def _varint_size(z: Any) -> Any:
    """Bytes of the unsigned varint encoding of each value of ``z`` (numpy uint64)."""
    import numpy as np

    global _THRESHOLDS
    if _THRESHOLDS is None:
        _THRESHOLDS = np.array([1 << b for b in range(7, 64, 7)], np.uint64)
    return np.searchsorted(_THRESHOLDS, z, side="right").astype(np.int64) + 1


def _zigzag_size(v: Any) -> Any:
    import numpy as np

    v = v.astype(np.int64, copy=False)
    if NATIVE is not None:
        return _native_sizes(v, zigzag=True)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    return _varint_size(z)


def _native_sizes(v: Any, *, zigzag: bool) -> Any:
    """The varint sizes in C (about 7x numpy's searchsorted, bench/README.md)."""
    import numpy as np

    assert NATIVE is not None
    v = np.ascontiguousarray(v)
    out = np.empty(len(v), np.int64)
    NATIVE.varint_sizes(v, out, zigzag)
    return out


def _lengths(col: pa.Array) -> Any:
    """Byte length of each string or binary value (0 for nulls), numpy int64:
    from the offsets buffer when there are no nulls (no compute kernel, no
    fill_null pass)."""
    import numpy as np
    import pyarrow.compute as pc

    if col.null_count == 0 and isinstance(col, (pa.LargeStringArray, pa.LargeBinaryArray)):
        offsets = np.frombuffer(col.buffers()[1], np.int64)[col.offset : col.offset + len(col) + 1]
        return np.diff(offsets)
    if col.null_count == 0 and isinstance(col, (pa.StringArray, pa.BinaryArray)):
        narrow = np.frombuffer(col.buffers()[1], np.int32)[col.offset : col.offset + len(col) + 1]
        return np.diff(narrow).astype(np.int64)
    return pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _sizes(col: pa.Array, kind: _Kind, parent: Any) -> Any:
    """Per row: the bytes an Avro encoder writes for this field's decoded
    values (numpy int64), 0 where ``parent`` (the rows whose enclosing record
    is present, a numpy bool array; None: all) is not."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(col)
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False) if col.null_count else None
    if valid is not None and not kind.nullable:
        if (~valid if parent is None else ~valid & parent).any():
            raise ValueError("nulls in a non-nullable field")
    here = valid if parent is None else (parent if valid is None else parent & valid)
    if kind.wire == "record":
        assert isinstance(col, pa.StructArray)
        size = np.zeros(n, np.int64)
        for i, child in enumerate(kind.children):
            size += _sizes(col.field(i), child, here)
    elif kind.wire in ("long", "int"):
        ints = pc.fill_null(col, 0) if col.null_count else col
        size = _zigzag_size(ints.to_numpy(zero_copy_only=False))
    elif kind.wire in ("string", "bytes"):
        length = _lengths(col)
        size = _zigzag_size(length) + length
    elif kind.wire in ("array", "map"):  # a map is read as its list of entries
        size = _array_sizes(col, kind.children[0])
    elif kind.wire == "fixed":
        length = _lengths(col)
        if ((length != kind.size) if here is None else (length != kind.size) & here).any():
            raise ValueError("a fixed value of the wrong size")
        size = np.full(n, kind.size, np.int64)
    elif kind.wire == "boolean":
        size = np.ones(n, np.int64)
    elif kind.wire == "float":
        size = np.full(n, 4, np.int64)
    elif kind.wire == "double":
        size = np.full(n, 8, np.int64)
    else:
        raise ValueError(kind.wire)
    if here is not None:
        size = np.where(here, size, 0)
    if kind.nullable:  # the union's branch index, wherever the enclosing record is
        size = size + (1 if parent is None else parent.astype(np.int64))
    return size


def _check_branches(
    col: pa.Array, kind: _Kind, starts: Any, present: Any | None, blob: Any
) -> None:
    """Raise ValueError unless every ``[null, x]`` union under this field
    wrote the branch index its decoded value says (0 or 1, a one-byte zigzag
    varint: 0x00 or 0x02). The size check cannot see these bytes: a body
    giving index -2 or 2 has the right length, fastavro refuses it, and polars
    would read it as the value branch. ``starts``: where each element of
    ``col`` begins in ``blob`` (the bodies, numpy uint8); ``present``: the
    elements whose enclosing value exists (numpy bool; None: all)."""
    import numpy as np
    import pyarrow.compute as pc

    if not _has_union(kind):
        return
    here = present
    if kind.nullable:
        valid = pc.is_valid(col).to_numpy(zero_copy_only=False) if col.null_count else None
        value_byte, null_byte = (2, 0) if kind.null_first else (0, 2)
        wrote = blob[starts] if present is None else blob[starts[present]]
        if valid is None:
            wrong = (wrote != value_byte).any()
        else:
            is_value = valid if present is None else valid[present]
            wrong = (wrote != np.where(is_value, value_byte, null_byte)).any()
            here = valid if present is None else present & valid
        if wrong:
            raise ValueError("a union branch index that is not its value's")
        starts = starts + 1
    if kind.wire == "record":
        assert isinstance(col, pa.StructArray)
        at = starts.copy()
        for i, child in enumerate(kind.children):
            field = col.field(i)
            _check_branches(field, child, at, here, blob)
            at += _sizes(field, child, here)
    elif kind.wire in ("array", "map"):
        assert isinstance(col, (pa.ListArray, pa.LargeListArray))
        counts = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
        counts = counts.astype(np.int64)
        items = col.flatten()
        item = kind.children[0]
        sizes = _sizes(items, item, None)
        before = np.cumsum(sizes) - sizes  # bytes of the items before each, overall
        some = counts > 0
        nonempty = counts[some]
        firsts = (np.cumsum(counts) - counts)[some]
        item_starts = np.repeat(starts[some] + _zigzag_size(nonempty) - before[firsts], nonempty)
        item_starts += before
        present_items = None if here is None else np.repeat(here, counts)
        _check_branches(items, item, item_starts, present_items, blob)


def _has_union(kind: _Kind) -> bool:
    return kind.nullable or any(_has_union(c) for c in kind.children)


def _array_sizes(col: pa.Array, item: _Kind) -> Any:
    """Per row, the canonical encoding of an array: one block (its count as a
    zigzag varint, then the items) and the 0 that ends it; 1 byte if empty."""
    import numpy as np
    import pyarrow.compute as pc

    assert isinstance(col, (pa.ListArray, pa.LargeListArray))
    counts = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
    counts = counts.astype(np.int64)
    items = _sizes(col.flatten(), item, None)
    ends = np.cumsum(counts)
    total = np.concatenate(([0], np.cumsum(items)))
    body = total[ends] - total[ends - counts]
    return np.where(counts > 0, _zigzag_size(counts) + body + 1, 1)


# logical type -> (wire primitive, how to turn the wire integers into the column)
_LOGICAL: dict[str, tuple[str, str]] = {
    "date": ("int", "date"),
    "time-millis": ("int", "time-millis"),
    "time-micros": ("long", "time-micros"),
    "timestamp-millis": ("long", "ts-millis"),
    "timestamp-micros": ("long", "ts-micros"),
    "local-timestamp-millis": ("long", "ts-millis"),
    "local-timestamp-micros": ("long", "ts-micros"),
    "uuid": ("string", ""),
    "decimal": ("bytes", "decimal"),
}


@dataclass(frozen=True)
class _Kind:
    """How one field is written: its wire type (an Avro primitive, "fixed"
    with its ``size``, "record" with a child per field, "array" with the
    item as its one child, or "map" with its entry, a record of a string key
    and the value, as its one child), whether it is a ``[null, x]`` union, and the
    conversion of a logical type or of an enum's index to its ``symbols``
    ("" for none)."""

    wire: str
    nullable: bool = False
    null_first: bool = True  # ["null", x]; False for [x, "null"]
    conversion: str = ""
    children: tuple[_Kind, ...] = ()
    symbols: tuple[str, ...] = ()
    size: int = 0


def _branch(b: Any, depth: int = 0) -> _Kind | None:
    """One union branch or field type, None if not bulk-decodable."""
    if isinstance(b, str):
        return _Kind(b) if b in _PRIMITIVE_NAMES else None
    if not isinstance(b, dict):
        return None
    base, logical = b.get("type"), b.get("logicalType")
    if base == "fixed":
        size = b.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return None
        if logical is None:
            return _Kind("fixed", size=size)
        return _Kind("fixed", size=size, conversion="decimal") if logical == "decimal" else None
    if logical is not None:
        found = _LOGICAL.get(logical) if isinstance(logical, str) else None
        if found is not None and base == found[0]:
            return _Kind(found[0], conversion=found[1])
        return None
    if base == "record" and depth < _MAX_DEPTH:
        children = _record_kinds(b, depth + 1)
        return _Kind("record", children=tuple(children)) if children else None
    if base == "array" and depth < _MAX_DEPTH:
        item = _field_kind(b.get("items"), depth + 1)
        return _Kind("array", children=(item,)) if item is not None else None
    if base == "map" and depth < _MAX_DEPTH:
        value = _field_kind(b.get("values"), depth + 1)
        if value is None:
            return None
        return _Kind("map", children=(_Kind("record", children=(_Kind("string"), value)),))
    if base == "enum":  # read as its symbol's index: an int on the wire
        symbols = b.get("symbols")
        if isinstance(symbols, list) and symbols and all(isinstance(x, str) for x in symbols):
            return _Kind("int", conversion="enum", symbols=tuple(symbols))
        return None
    if isinstance(base, str) and base in _PRIMITIVE_NAMES and base != "null":
        return _Kind(base)  # {"type": "string", "avro.java.string": ...}
    return None


def _field_kind(ftype: Any, depth: int) -> _Kind | None:
    branches = ftype if isinstance(ftype, list) else [ftype]
    if len(branches) > 2 or (len(branches) == 2 and "null" not in branches):
        return None
    rest = [b for b in branches if b != "null"]
    if len(rest) != 1:
        return None
    kind = _branch(rest[0], depth)
    if kind is None or kind.wire == "null":
        return None
    return replace(kind, nullable=len(branches) == 2, null_first=branches[0] == "null")


def _record_kinds(record: dict[str, Any], depth: int) -> list[_Kind] | None:
    out = []
    for f in record.get("fields", []):
        kind = _field_kind(f["type"], depth)
        if kind is None:
            return None
        out.append(kind)
    return out


def _field_kinds(decoder: AvroDecoder) -> list[_Kind] | None:
    """Per field of the value record, or None if it is not bulk-decodable."""
    expanded = _expanded(decoder)
    return None if expanded is None else _record_kinds(expanded, 0)


def _expanded(decoder: AvroDecoder) -> dict[str, Any] | None:
    """The decoder's value schema, expanded (see :func:`_expand`), once."""
    if not hasattr(decoder, "_expanded_schema"):
        decoder._expanded_schema = _expand(decoder.schema_json, decoder.reference_types)  # type: ignore[attr-defined]
    found: dict[str, Any] | None = decoder._expanded_schema  # type: ignore[attr-defined]
    return found


def _expand(schema_json: dict[str, Any], references: dict[str, Any]) -> dict[str, Any] | None:
    """The record schema with every reference to a named type (its own, or
    one of the schemas it references, as the registry's references give them)
    replaced by its definition: fastavro's expansion. A recursive reference
    stays a name, so such a schema is not bulk-decodable; None if fastavro
    cannot expand it."""
    import fastavro

    try:
        parsed = fastavro.parse_schema(schema_json, named_schemas=dict(references), expand=True)
    except (ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException):
        return None
    if not isinstance(parsed, dict):
        return None
    return {k: v for k, v in parsed.items() if not k.startswith("__")}


def _wire_schema(schema_json: dict[str, Any]) -> dict[str, Any]:
    """The (expanded) record schema with logical types replaced by their wire
    primitive, in nested records too, and each map by the array of entry
    records it is written as. Names do not reach the wire, and an expanded
    schema repeats definitions, so every record and fixed gets a name of its
    own, in a namespace of ours."""
    named = 0

    def name() -> str:
        nonlocal named
        named += 1
        return f"_tidelake_wire._{named}"

    def strip(t: Any) -> Any:
        if isinstance(t, list):
            return [strip(b) for b in t]
        if not isinstance(t, dict):
            return t
        if t.get("type") == "enum":  # polars reads enums only as top-level fields
            return "int"
        if t.get("type") == "fixed":  # a decimal on fixed reads as the fixed
            return {"type": "fixed", "name": name(), "size": t["size"]}
        if t.get("logicalType") in _LOGICAL:
            return t["type"]
        if t.get("type") == "record":
            fields = [{**f, "type": strip(f["type"])} for f in t["fields"]]
            return {"type": "record", "name": name(), "fields": fields}
        if t.get("type") == "array":
            return {**t, "items": strip(t["items"])}
        if t.get("type") == "map":
            entry = {
                "type": "record",
                "name": name(),
                "fields": [
                    {"name": "key", "type": "string"},
                    {"name": "value", "type": strip(t["values"])},
                ],
            }
            return {"type": "array", "items": entry}
        return t

    out: dict[str, Any] = strip(schema_json)
    return out


def _decimals(col: pa.Array, target: pa.Decimal128Type) -> pa.Array:
    """Avro decimal bytes (the unscaled value, big-endian two's complement) ->
    decimal128 (16 little-endian bytes): every value's bytes reversed and
    sign-extended in numpy at once. A value wider than 16 bytes or past the
    precision raises ValueError, so the per-record path handles the batch."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(col)
    if not isinstance(col, pa.LargeBinaryArray):
        col = col.cast(pa.large_binary())
    offsets = np.frombuffer(col.buffers()[1], np.int64)[col.offset : col.offset + n + 1]
    starts = offsets[:-1]
    lens = np.diff(offsets)
    if col.null_count:
        lens = np.where(pc.is_valid(col).to_numpy(zero_copy_only=False), lens, 0)
    if n and int(lens.max()) > 16:
        raise ValueError("a decimal wider than 16 bytes")
    data_buf = col.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    negative = np.zeros(n, bool)
    some = lens > 0
    negative[some] = data[starts[some]] >= 0x80
    out = np.repeat(np.where(negative, 0xFF, 0).astype(np.uint8), 16)
    total = int(lens.sum())
    if total:
        row = np.repeat(np.arange(n, dtype=np.int64), lens)
        k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        row_lens = np.repeat(lens, lens)
        out[row * 16 + row_lens - 1 - k] = data[np.repeat(starts, lens) + k]
    arr = pa.Array.from_buffers(target, n, [None, pa.py_buffer(out.tobytes())])
    if col.null_count:
        arr = pc.if_else(pc.is_valid(col), arr, pa.scalar(None, target))
    low, high = (v.as_py() for v in pc.min_max(arr).values())
    bound = Decimal(10) ** (target.precision - target.scale)
    if low is not None and (high >= bound or low <= -bound):
        raise ValueError(f"a decimal past precision {target.precision}")
    return arr


def _symbols(col: pa.Array, symbols: tuple[str, ...]) -> pa.Array:
    """Enum indexes -> their symbols; an index past the symbols raises
    ValueError, so the per-record path handles the batch."""
    import pyarrow.compute as pc

    if len(col) - col.null_count:
        low, high = (v.as_py() for v in pc.min_max(col).values())
        if low < 0 or high >= len(symbols):
            raise ValueError("an enum index past the symbols")
    return pa.array(symbols, pa.string()).take(col)


def _convert(col: pa.Array, kind: _Kind, target: pa.DataType) -> pa.Array:
    """Wire values (ints, strings, records of them) -> the column type the
    per-record path produces."""
    import pyarrow.compute as pc

    conversion = kind.conversion
    if kind.wire == "record":
        assert isinstance(col, pa.StructArray) and isinstance(target, pa.StructType)
        children = [
            _convert(col.field(i), child, target.field(i).type)
            for i, child in enumerate(kind.children)
        ]
        mask = pc.is_null(col) if col.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if kind.wire == "array":
        assert isinstance(col, (pa.ListArray, pa.LargeListArray)) and pa.types.is_list(target)
        values = _convert(col.flatten(), kind.children[0], target.value_type)
        counts = pc.fill_null(pc.list_value_length(col), 0).cast(pa.int64())
        offsets = pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int64()), counts]))
        mask = pc.is_null(col) if col.null_count else None
        return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, type=target, mask=mask)
    if kind.wire == "map":
        assert isinstance(col, (pa.ListArray, pa.LargeListArray)) and pa.types.is_map(target)
        entries = col.flatten()
        assert isinstance(entries, pa.StructArray)
        value_kind = kind.children[0].children[1]
        keys = entries.field(0).cast(target.key_type)
        _unique_keys(col, keys)
        items = _convert(entries.field(1), value_kind, target.item_type)
        counts = pc.fill_null(pc.list_value_length(col), 0).cast(pa.int64())
        offsets = pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int64()), counts]))
        mask = pc.is_null(col) if col.null_count else None
        return pa.MapArray.from_arrays(
            offsets.cast(pa.int32()), keys, items, type=target, mask=mask
        )
    if conversion == "decimal":
        assert isinstance(target, pa.Decimal128Type)
        return _decimals(col, target)
    if conversion == "enum":
        return _symbols(col, kind.symbols)
    if conversion == "date":
        return col.cast(pa.int32()).cast(pa.date32())
    if conversion in ("time-millis", "ts-millis"):
        col = pc.multiply_checked(col.cast(pa.int64()), 1000)
    elif conversion in ("time-micros", "ts-micros"):
        col = col.cast(pa.int64())
    return col.cast(target)


def _unique_keys(col: pa.Array, keys: pa.Array) -> None:
    """A body may repeat a key in one map, where the per-record decoder keeps
    the last value: raise ValueError then, so that the per-record path
    handles the batch (an Arrow map would keep both)."""
    import numpy as np
    import pyarrow.compute as pc

    if len(keys) < 2:
        return
    counts = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
    if int(counts.max()) < 2:
        return
    codes = pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts.astype(np.int64))
    pairs = np.sort(owner * (int(codes.max()) + 1) + codes)  # sorting beats np.unique's hash here
    if bool((pairs[1:] == pairs[:-1]).any()):
        raise ValueError("a map repeats a key")


def _fits(kinds: list[_Kind] | tuple[_Kind, ...], t: pa.DataType) -> bool:
    """The record's fields (``kinds``) line up with the struct type ``t``."""
    if not pa.types.is_struct(t) or t.num_fields == 0 or t.num_fields != len(kinds):
        return False
    return all(_fits_kind(kind, t.field(i).type) for i, kind in enumerate(kinds))


def _fits_kind(kind: _Kind, t: pa.DataType) -> bool:
    if kind.wire == "record":
        return _fits(kind.children, t)
    if kind.wire == "array":
        return pa.types.is_list(t) and _fits_kind(kind.children[0], t.value_type)
    if kind.wire == "map":
        value = kind.children[0].children[1]
        return pa.types.is_map(t) and t.key_type == pa.string() and _fits_kind(value, t.item_type)
    if kind.conversion == "enum":
        return bool(t == pa.string())
    if kind.wire == "fixed" and not kind.conversion:
        return bool(t == pa.binary(kind.size))
    return bool(kind.conversion) or t in _SIMPLE


def _eligible(decoder: AvroDecoder) -> bool:
    kinds = _field_kinds(decoder)
    return kinds is not None and _fits(kinds, decoder.arrow_type)


def decode_bulk(decoder: AvroDecoder, bodies: list[memoryview | bytes]) -> pa.Array | None:
    """All bodies as one struct array of ``decoder.arrow_type``, or None (not eligible)."""
    if len(bodies) < 64 or not _eligible(decoder) or not bulk_available():
        return None
    parts = []
    for s in range(0, len(bodies), _BLOCK):
        parts.append(b"".join(bytes(b) for b in bodies[s : s + _BLOCK]))
    lengths = [len(b) for b in bodies]
    return _decode_blocks(
        decoder,
        parts,
        [min(_BLOCK, len(bodies) - s) for s in range(0, len(bodies), _BLOCK)],
        lengths,
    )


def decode_container_block(decoder: AvroDecoder, block: bytes, lengths: Any) -> pa.Array | None:
    """Bodies already concatenated into ``block`` (``lengths``: each body's size)."""
    if len(lengths) == 0 or not _eligible(decoder) or not bulk_available():
        return None
    return _decode_blocks(decoder, [block], [len(lengths)], lengths)


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    """The column as one array: polars hands one chunk per column here, and
    combine_chunks() copies even a single chunk (16 ms per 100k rows here,
    a third of the decode)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _decode_blocks(
    decoder: AvroDecoder, blocks: list[bytes], counts: list[int], lengths: Any
) -> pa.Array | None:
    import polars as pl

    header = getattr(decoder, "_container_header", None)
    if header is None:
        expanded = _expanded(decoder)
        if expanded is None:
            return None
        header = _header(_wire_schema(expanded))
        decoder._container_header = header  # type: ignore[attr-defined]
    parts = [header]
    for block, count in zip(blocks, counts, strict=True):
        parts.append(write_varint(count))
        parts.append(write_varint(len(block)))
        parts.append(block)
        parts.append(_SYNC)
    try:
        frame = pl.read_avro(io.BytesIO(b"".join(parts)))
    except Exception as exc:  # polars raises OSError, ComputeError... on bad bodies
        raise ValueError(f"bulk Avro decode failed: {exc}") from exc
    except BaseException as exc:
        # and on some, a Rust panic: pyo3's PanicException, a BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise ValueError(f"bulk Avro decode failed: {exc}") from None
    total = sum(counts)
    if frame.height != total:
        raise ValueError("bulk Avro decode returned a different row count")
    table = frame.to_arrow()
    t = decoder.arrow_type
    kinds = _field_kinds(decoder)
    if kinds is None:
        return None
    wire = [_one_chunk(table.column(t.field(i).name)) for i in range(t.num_fields)]
    import numpy as np

    expected = np.zeros(total, np.int64)
    sizes = []
    for col, kind in zip(wire, kinds, strict=True):
        sizes.append(_sizes(col, kind, None))
        expected += sizes[-1]
    lengths = np.asarray(lengths, np.int64)
    if not np.array_equal(expected, lengths):
        raise ValueError("bulk Avro decode is misaligned: falling back to per-record decoding")
    unions = [i for i, kind in enumerate(kinds) if _has_union(kind)]
    if unions:
        blob = np.frombuffer(b"".join(blocks), np.uint8)
        starts = np.cumsum(lengths) - lengths
        for i in range(unions[-1] + 1):
            _check_branches(wire[i], kinds[i], starts, None, blob)
            starts = starts + sizes[i]
    arrays = [
        _convert(col, kind, t.field(i).type)
        for i, (col, kind) in enumerate(zip(wire, kinds, strict=True))
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(t))
