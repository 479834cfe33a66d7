"""Convert one partition's record batches into Arrow tables (runs in a worker thread).

Column layout of every table topic table:

- ``_kafka_partition`` int, ``_kafka_offset`` long, ``_kafka_timestamp``
  timestamptz, ``_kafka_key`` binary (the raw key), ``_kafka_headers``
  list<struct<key string, value binary>> (a list keeps repeated header keys);
- ``key``: the converted key, when ``convert.key.type`` is not ``raw``;
- the value: ``value`` (binary for raw, string for string, a struct for a
  schema) with ``transform.value.type=none``; the record's fields as columns
  with ``flatten``; the ``after`` image (``before`` for deletes) as columns
  plus ``_cdc_op`` with ``flatten_debezium``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingest.protocol.records import BatchHeader, Record
from table_topic.config import ConvertType, ErrorsTolerance, TableTopicConfig, TransformType
from table_topic.convert.records import RecordColumns, read_columns
from table_topic.decode.base import PayloadDecoder
from table_topic.decode.protobuf import ProtobufDecoder
from table_topic.decode.resolver import LookupPending, SchemaResolver
from table_topic.errors import InvalidDataError, TableTopicError

__all__ = ["ConvertedChunk", "DeadLetter", "convert_batches", "convert_records", "METADATA_FIELDS"]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
METADATA_FIELDS = [
    pa.field("_kafka_partition", pa.int32()),
    pa.field("_kafka_offset", pa.int64()),
    pa.field("_kafka_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("_kafka_key", pa.binary()),
    pa.field("_kafka_headers", HEADER_TYPE),
]
CDC_OP = "_cdc_op"


@dataclass(slots=True)
class DeadLetter:
    """A record that could not be converted, with why."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    error: str
    error_class: str


@dataclass(slots=True)
class ConvertedChunk:
    """Converted rows of one partition covering offsets [start, next_offset)."""

    partition: int
    start: int
    next_offset: int
    tables: list[pa.Table] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    rows: int = 0
    max_timestamp: int = -1
    fatal: str | None = None  # errors.tolerance=none: stopped before a bad record

    @property
    def records(self) -> int:
        return self.rows + len(self.dead)


def read_batches(batches: Sequence[tuple[bytes, BatchHeader]], start: int) -> list[Record]:
    """Records as objects (tests and tools); the conversion path uses read_columns."""
    cols = read_columns(batches, start)
    return [cols.record(i) for i in range(len(cols))]


# ------------------------------------------------------------------ one side (key or value)
_RAW = "raw"
_STRING = "string"


def _side_kinds(
    payloads: list[bytes | None],
    kind: ConvertType,
    resolver: SchemaResolver,
    subject: str,
    message: str,
    tolerate_all: bool = False,
) -> tuple[list[Any], list[str | None]]:
    """Per payload: a decoder key (or the exception that rules it out) and the body to decode.

    A payload whose schema is not in the registry is invalid data. A schema that is
    there but cannot be used (a registry failure, a type no table column can hold)
    is not the record's fault: it stops the table until fixed, unless
    ``errors.tolerance=all`` dead-letters it too.
    """
    keys: list[Any] = []
    bodies: list[Any] = []
    if kind is ConvertType.RAW or kind is ConvertType.STRING:
        tag = _RAW if kind is ConvertType.RAW else _STRING
        return [tag] * len(payloads), list[Any](payloads)
    latest: PayloadDecoder | None = None
    latest_error: str | None = None
    if kind is ConvertType.BY_LATEST_SCHEMA:
        try:
            latest = resolver.latest(subject, message)
        except InvalidDataError as exc:
            latest_error = str(exc)
        except LookupPending:
            raise
        except Exception as exc:
            if not tolerate_all:
                raise
            latest_error = f"{type(exc).__name__}: {exc}"
    if kind is ConvertType.BY_LATEST_SCHEMA:
        for p in payloads:
            if p is None:
                keys.append(None)  # null payload: a null column value (tombstone)
                bodies.append(None)
            elif latest is None:
                keys.append(InvalidDataError(latest_error or "no schema"))
                bodies.append(None)
            else:
                keys.append(latest)
                bodies.append(p)
        return keys, bodies
    cache: dict[int, Any] = {}
    not_framed = InvalidDataError(
        "payload is not in the Confluent wire format (magic byte 0 + schema id)"
    )
    for p in payloads:
        if p is None:
            keys.append(None)
            bodies.append(None)
            continue
        if len(p) < 5 or p[0] != 0:
            keys.append(not_framed)
            bodies.append(None)
            continue
        sid = int.from_bytes(p[1:5], "big")
        dec = cache.get(sid)
        if dec is None:
            try:
                dec = resolver.by_id(sid, message)
            except InvalidDataError as exc:
                dec = exc
            except LookupPending:
                raise
            except Exception as exc:
                if not tolerate_all:
                    raise
                dec = exc
            cache[sid] = dec
        keys.append(dec)
        bodies.append(p[5:] if not isinstance(dec, Exception) else None)
    return keys, bodies


def _decode_one(dec: Any, body: Any, latest: bool) -> Any:
    if body is None:
        return None
    if dec == _RAW:
        return bytes(body)
    if dec == _STRING:
        try:
            return bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidDataError(f"payload is not UTF-8: {exc}") from exc
    if latest and isinstance(dec, ProtobufDecoder):
        return dec.decode_plain(body)
    return dec.decode(body)


def _arrow_type(dec: Any) -> pa.DataType:
    if dec == _RAW:
        return pa.binary()
    if dec == _STRING:
        return pa.string()
    if dec is None:
        return pa.null()
    arrow_type: pa.DataType = dec.arrow_type
    return arrow_type


def _column(
    dec: Any, bodies: list[Any], latest: bool
) -> tuple[pa.Array | None, list[Any], list[int], list[str]]:
    """Decode a run's bodies: (bulk array or None, values, bad indexes, their errors)."""
    if isinstance(dec, PayloadDecoder) and not latest and all(b is not None for b in bodies):
        try:
            arr = dec.decode_column(bodies)
        except Exception:
            arr = None
        if arr is not None:
            return arr, [], [], []
    values: list[Any] = []
    bad: list[int] = []
    errors: list[str] = []
    for i, b in enumerate(bodies):
        try:
            values.append(_decode_one(dec, b, latest))
        except InvalidDataError as exc:
            values.append(None)
            bad.append(i)
            errors.append(str(exc))
    return None, values, bad, errors


def _to_array(values: list[Any], t: pa.DataType) -> tuple[pa.Array | None, list[int], list[str]]:
    """Values as one array; on failure, find the rows that do not fit."""
    try:
        return pa.array(values, type=t), [], []
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    bad, errors = [], []
    for i, v in enumerate(values):
        try:
            pa.array([v], type=t)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            bad.append(i)
            errors.append(f"value does not fit {t}: {exc}")
    return None, bad, errors


# ------------------------------------------------------------------ the chunk
def convert_batches(
    partition: int,
    batches: Sequence[tuple[bytes, BatchHeader]],
    start: int,
    next_offset: int,
    cfg: TableTopicConfig,
    resolver: SchemaResolver,
) -> ConvertedChunk:
    """Convert the records at offsets >= start of ``batches`` (covering up to ``next_offset``)."""
    from table_topic.convert.vector import convert_vectorised

    fast = convert_vectorised(partition, batches, start, next_offset, cfg, resolver)
    if fast is not None:
        return fast
    return convert_columns(
        partition, read_columns(batches, start), start, next_offset, cfg, resolver
    )


def convert_records(
    partition: int,
    records: list[Record],
    start: int,
    next_offset: int,
    cfg: TableTopicConfig,
    resolver: SchemaResolver,
) -> ConvertedChunk:
    return convert_columns(
        partition, RecordColumns.from_records(records), start, next_offset, cfg, resolver
    )


def convert_columns(
    partition: int,
    records: RecordColumns,
    start: int,
    next_offset: int,
    cfg: TableTopicConfig,
    resolver: SchemaResolver,
) -> ConvertedChunk:
    chunk = ConvertedChunk(partition, start, next_offset)
    n = len(records)
    if not n:
        return chunk
    tolerate_all = cfg.errors_tolerance is ErrorsTolerance.ALL
    vkeys, vbodies = _side_kinds(
        records.values,
        cfg.value_type,
        resolver,
        cfg.value_subject,
        cfg.value_message,
        tolerate_all,
    )
    if cfg.key_type is ConvertType.RAW:
        kkeys: list[Any] = [None] * n
        kbodies: list[Any] = [None] * n
    else:
        kkeys, kbodies = _side_kinds(
            records.keys, cfg.key_type, resolver, cfg.key_subject, cfg.key_message, tolerate_all
        )
    dead: dict[int, str] = {}
    kinds: dict[int, str] = {}  # error class of a dead record, when not InvalidDataError
    for i, k in enumerate(vkeys):
        if isinstance(k, Exception):
            dead[i] = str(k)
            kinds[i] = type(k).__name__
    if cfg.key_type is not ConvertType.RAW:
        for i, k in enumerate(kkeys):
            if isinstance(k, Exception) and i not in dead:
                dead[i] = str(k)
                kinds[i] = type(k).__name__
    i = 0
    if not dead and vkeys.count(vkeys[0]) == n and kkeys.count(kkeys[0]) == n:
        # the common case: one schema for the whole chunk
        table = _convert_run(
            records, list(range(n)), vkeys[0], vbodies, kkeys[0], kbodies, cfg, partition, dead
        )
        if table is not None and table.num_rows:
            chunk.tables.append(table)
            chunk.rows += table.num_rows
        i = n
    # runs of records sharing key and value decoders (dead records in between are skipped)
    while i < n:
        if i in dead:
            i += 1
            continue
        run = [i]
        vk = vkeys[i]
        kk = kkeys[i]
        j = i + 1
        while j < n:
            if j in dead:
                j += 1
                continue
            if not (_same(vkeys[j], vk) and _same(kkeys[j], kk)):
                break
            vk = vk if vk is not None else vkeys[j]
            kk = kk if kk is not None else kkeys[j]
            run.append(j)
            j += 1
        table = _convert_run(records, run, vk, vbodies, kk, kbodies, cfg, partition, dead)
        if table is not None and table.num_rows:
            chunk.tables.append(table)
            chunk.rows += table.num_rows
        i = j
    for idx in sorted(dead):
        r = records.record(idx)
        chunk.dead.append(
            DeadLetter(
                partition,
                r.offset,
                r.timestamp,
                r.key,
                r.value,
                r.headers,
                dead[idx],
                kinds.get(idx, "InvalidDataError"),
            )
        )
    if dead and cfg.errors_tolerance is ErrorsTolerance.NONE:
        first_bad = min(dead)
        bad_offset = records.offsets[first_bad]
        head = convert_columns(partition, records.head(first_bad), start, bad_offset, cfg, resolver)
        head.fatal = f"offset {bad_offset}: {dead[first_bad]}"
        return head
    chunk.max_timestamp = max(records.timestamps)
    return chunk


def _same(a: Any, b: Any) -> bool:
    """Decoder keys: None (null payload) joins any run."""
    return a is b or a is None or b is None or a == b


def _convert_run(
    records: RecordColumns,
    idx: list[int],
    vdec: Any,
    vbodies: list[Any],
    kdec: Any,
    kbodies: list[Any],
    cfg: TableTopicConfig,
    partition: int,
    dead: dict[int, str],
) -> pa.Table | None:
    latest_v = cfg.value_type is ConvertType.BY_LATEST_SCHEMA
    latest_k = cfg.key_type is ConvertType.BY_LATEST_SCHEMA
    bulk, values, bad, errors = _column(vdec, [vbodies[i] for i in idx], latest_v)
    for b, e in zip(bad, errors, strict=True):
        dead[idx[b]] = e
    vtype = _arrow_type(vdec)
    kvalues: list[Any] = []
    ktype = _arrow_type(kdec)
    if cfg.key_type is not ConvertType.RAW:
        kbulk, kvalues, kbad, kerrors = _column(kdec, [kbodies[i] for i in idx], latest_k)
        if kbulk is not None:
            kvalues = kbulk.to_pylist()
        for b, e in zip(kbad, kerrors, strict=True):
            dead.setdefault(idx[b], e)
    if bulk is None:
        varr, vbad, verrs = _to_array(values, vtype)
        for b, e in zip(vbad, verrs, strict=True):
            dead.setdefault(idx[b], e)
    else:
        varr = bulk
    karr = None
    if cfg.key_type is not ConvertType.RAW:
        karr, kbad2, kerrs2 = _to_array(kvalues, ktype)
        for b, e in zip(kbad2, kerrs2, strict=True):
            dead.setdefault(idx[b], e)
    keep = [k for k, i in enumerate(idx) if i not in dead]
    if len(keep) != len(idx):
        if not keep:
            return None
        if varr is None:
            varr = pa.array([values[k] for k in keep], type=vtype)
        else:
            varr = varr.take(pa.array(keep))
        if cfg.key_type is not ConvertType.RAW:
            karr = (
                pa.array([kvalues[k] for k in keep], type=ktype)
                if karr is None
                else karr.take(pa.array(keep))
            )
    assert varr is not None
    rows = [idx[k] for k in keep]
    try:
        return _assemble(records, rows, varr, karr, cfg, partition)
    except InvalidDataError as exc:
        for k in keep:
            dead[idx[k]] = str(exc)
        return None


def _metadata(records: RecordColumns, rows: list[int], partition: int) -> list[pa.Array]:
    n = len(rows)
    if n == len(records):
        offsets, timestamps, keys, headers_l = (
            records.offsets,
            records.timestamps,
            records.keys,
            records.headers,
        )
    else:
        offsets = [records.offsets[i] for i in rows]
        timestamps = [records.timestamps[i] for i in rows]
        keys = [records.keys[i] for i in rows]
        headers_l = [records.headers[i] for i in rows]
    ts = pa.array(timestamps, pa.int64())
    if any(headers_l):
        headers = pa.array(
            [[{"key": k, "value": v} for k, v in h] for h in headers_l], type=HEADER_TYPE
        )
    else:
        headers = pa.ListArray.from_arrays(
            pa.array([0] * (n + 1), pa.int32()), pa.array([], HEADER_TYPE.value_type)
        )
    return [
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        ts.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        pa.array(keys, pa.binary()),
        headers,
    ]


def _struct_columns(arr: pa.Array, what: str) -> tuple[list[str], list[pa.Array]]:
    if not pa.types.is_struct(arr.type):
        raise InvalidDataError(f"{what} needs record values, got {arr.type}")
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    flat = (
        arr.flatten()
        if arr.null_count == 0
        else [pc.struct_field(arr, [i]) for i in range(len(names))]
    )
    return names, list(flat)


def _assemble(
    records: RecordColumns,
    rows: list[int],
    varr: pa.Array,
    karr: pa.Array | None,
    cfg: TableTopicConfig,
    partition: int,
) -> pa.Table:
    return assemble_columns(_metadata(records, rows, partition), varr, karr, cfg)


def assemble_columns(
    metadata: list[pa.Array], varr: pa.Array, karr: pa.Array | None, cfg: TableTopicConfig
) -> pa.Table:
    """The table from metadata columns plus the key and value columns per the transform."""
    names = [f.name for f in METADATA_FIELDS]
    arrays = list(metadata)
    if karr is not None:
        names.append("key")
        arrays.append(karr)
    if cfg.transform is TransformType.NONE:
        names.append("value")
        arrays.append(varr)
    elif cfg.transform is TransformType.FLATTEN:
        vnames, varrs = _struct_columns(varr, "transform flatten")
        names += vnames
        arrays += varrs
    else:
        vnames, varrs = _struct_columns(varr, "transform flatten_debezium")
        fields = dict(zip(vnames, varrs, strict=True))
        if "op" not in fields or "after" not in fields:
            raise InvalidDataError("a Debezium envelope needs 'op' and 'after' fields")
        op = fields["op"].cast(pa.string())
        after = fields["after"]
        before = fields.get("before")
        image = after
        if before is not None and before.type == after.type:
            image = pc.if_else(pc.fill_null(pc.equal(op, "d"), False), before, after)
        inames, iarrs = _struct_columns(image, "the Debezium after/before image")
        names += inames
        arrays += iarrs
        names.append(CDC_OP)
        arrays.append(op)
    if len(set(names)) != len(names):
        raise TableTopicError(f"column names repeat: {names}")
    return pa.Table.from_arrays(arrays, names=names)


def error_class_of(exc: BaseException) -> str:
    return type(exc).__name__
