"""Table topic configs: their definitions, validation and a parsed view per topic.

Tidelake's names are ``table.topic.*``; AutoMQ's ``automq.table.topic.*`` names
are accepted as aliases (the broker stores the canonical name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ingest.log.topic_config import (
    ConfigDef,
    InvalidConfigError,
    TopicConfig,
    TopicConfigRegistry,
)
from table_topic.settings import TableTopicSettings

__all__ = [
    "ConvertType",
    "TableFormat",
    "ErrorsTolerance",
    "PartitionField",
    "TableTopicConfig",
    "TransformType",
    "parse_partition_by",
    "register_table_topic_configs",
    "table_topic_config_defs",
]

PREFIX = "table.topic."
AUTOMQ_PREFIX = "automq.table.topic."


class ConvertType(StrEnum):
    RAW = "raw"
    STRING = "string"
    BY_SCHEMA_ID = "by_schema_id"
    BY_LATEST_SCHEMA = "by_latest_schema"


class TransformType(StrEnum):
    NONE = "none"
    FLATTEN = "flatten"
    FLATTEN_DEBEZIUM = "flatten_debezium"


class TableFormat(StrEnum):
    """Which table formats a topic is written to (``table.topic.format``)."""

    ICEBERG = "iceberg"
    DELTA = "delta"
    BOTH = "both"

    @property
    def iceberg(self) -> bool:
        return self is not TableFormat.DELTA

    @property
    def delta(self) -> bool:
        return self is not TableFormat.ICEBERG


class ErrorsTolerance(StrEnum):
    NONE = "none"
    INVALID_DATA = "invalid_data"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One entry of ``table.topic.partition.by``: an Iceberg transform of a source column."""

    transform: str  # identity, year, month, day, hour, bucket, truncate, void
    column: str
    param: int | None = None

    @property
    def name(self) -> str:
        col = self.column.replace(".", "_")
        if self.transform == "identity":
            return col
        if self.param is not None:
            return f"{col}_{self.transform}_{self.param}"
        return f"{col}_{self.transform}"


_TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate", "void")
_CALL = re.compile(r"^\s*([a-zA-Z_]+)\s*\(\s*([^)]*?)\s*\)\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out if p.strip()]


def parse_partition_by(text: str) -> list[PartitionField]:
    """Parse ``[day(ts), bucket(id, 16), truncate(10, name), region]``.

    ``bucket`` and ``truncate`` take the column and the number in either order
    (AutoMQ writes ``bucket(name, 16)``; Iceberg's SQL ``bucket(16, name)``). A
    bare column name is ``identity``. Raises ValueError.
    """
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    fields: list[PartitionField] = []
    for part in _split_top(body):
        m = _CALL.match(part)
        if m is None:
            if not re.match(r"^[A-Za-z_][\w.]*$", part):
                raise ValueError(f"cannot parse partition field {part!r}")
            fields.append(PartitionField("identity", part))
            continue
        fn = m.group(1).lower()
        args = [a.strip() for a in m.group(2).split(",") if a.strip()]
        if fn not in _TRANSFORMS:
            raise ValueError(f"unknown partition transform {fn!r} (expected one of {_TRANSFORMS})")
        if fn in ("bucket", "truncate"):
            if len(args) != 2:
                raise ValueError(f"{fn} takes a column and a number: {part!r}")
            nums = [a for a in args if a.isdigit()]
            cols = [a for a in args if not a.isdigit()]
            if len(nums) != 1 or len(cols) != 1 or int(nums[0]) <= 0:
                raise ValueError(f"{fn} takes a column and a positive number: {part!r}")
            fields.append(PartitionField(fn, cols[0], int(nums[0])))
        else:
            if len(args) != 1:
                raise ValueError(f"{fn} takes one column: {part!r}")
            fields.append(PartitionField(fn, args[0]))
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"partition fields repeat: {text!r}")
    return fields


def _split_list(value: str) -> list[str]:
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    return [p.strip() for p in v.split(",") if p.strip()]


def _one_of(enum: type[StrEnum]) -> object:
    choices = [e.value for e in enum]

    def check(value: str) -> None:
        if value.strip().lower() not in choices:
            raise InvalidConfigError(f"{value!r} is not one of {', '.join(choices)}")

    return check


def _at_least(minimum: int) -> object:
    def check(value: str) -> None:
        if int(value) < minimum:
            raise InvalidConfigError(f"value {value} is below the minimum {minimum}")

    return check


def _partition_by(value: str) -> None:
    try:
        parse_partition_by(value)
    except ValueError as exc:
        raise InvalidConfigError(f"table.topic.partition.by: {exc}") from None


def _namespace(value: str) -> None:
    if not value or not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", value):
        raise InvalidConfigError(f"table.topic.namespace {value!r} is not a valid namespace")


def _id_columns(value: str) -> None:
    for col in _split_list(value):
        if not re.match(r"^[A-Za-z_][\w.]*$", col):
            raise InvalidConfigError(f"table.topic.id.columns: {col!r} is not a column name")


def table_topic_config_defs(settings: TableTopicSettings | None = None) -> list[ConfigDef]:
    """Every ``table.topic.*`` topic config, with AutoMQ aliases."""
    s = settings or TableTopicSettings.model_validate({})

    def d(
        name: str,
        type_: str,
        default: str | None,
        doc: str,
        validator: object = None,
        extra_aliases: tuple[str, ...] = (),
    ) -> ConfigDef:
        suffix = name[len(PREFIX) :]
        aliases = (AUTOMQ_PREFIX + suffix, *extra_aliases)
        return ConfigDef(name, type_, default, doc, validator, aliases)  # type: ignore[arg-type]

    conv = _one_of(ConvertType)
    return [
        d("table.topic.enable", "boolean", "false", "convert this topic into an Iceberg table"),
        d(
            "table.topic.format",
            "string",
            "iceberg",
            "iceberg|delta|both: the table formats the topic is written to",
            _one_of(TableFormat),
        ),
        d(
            "table.topic.commit.interval.ms",
            "long",
            str(s.default_commit_interval_ms),
            "how often the table is committed (ms, at least 1000)",
            _at_least(1000),
        ),
        d(
            "table.topic.namespace",
            "string",
            s.default_namespace,
            "Iceberg namespace of the table",
            _namespace,
        ),
        d(
            "table.topic.convert.value.type",
            "string",
            "raw",
            "raw|string|by_schema_id|by_latest_schema",
            conv,
        ),
        d(
            "table.topic.convert.key.type",
            "string",
            "raw",
            "raw|string|by_schema_id|by_latest_schema",
            conv,
        ),
        d(
            "table.topic.convert.value.subject",
            "string",
            "",
            "subject for by_latest_schema (default <topic>-value)",
        ),
        d(
            "table.topic.convert.key.subject",
            "string",
            "",
            "subject for by_latest_schema (default <topic>-key)",
        ),
        d(
            "table.topic.convert.value.message.full.name",
            "string",
            "",
            "Protobuf message name for by_latest_schema (default: the first message)",
        ),
        d(
            "table.topic.convert.key.message.full.name",
            "string",
            "",
            "Protobuf message name for by_latest_schema keys",
        ),
        d(
            "table.topic.transform.value.type",
            "string",
            "none",
            "none|flatten|flatten_debezium",
            _one_of(TransformType),
        ),
        d(
            "table.topic.partition.by",
            "string",
            "",
            "e.g. [day(_kafka_timestamp), bucket(id, 16)]",
            _partition_by,
        ),
        d(
            "table.topic.id.columns",
            "list",
            "",
            "columns identifying a row (upsert/CDC)",
            _id_columns,
        ),
        d(
            "table.topic.upsert.enable",
            "boolean",
            "false",
            "a later row replaces the earlier one with the same id",
        ),
        d(
            "table.topic.cdc.field",
            "string",
            "",
            "value field holding the CDC operation (I/U/D or c/u/d/r)",
        ),
        d(
            "table.topic.errors.tolerance",
            "string",
            "invalid_data",
            "none: stop at a bad record | invalid_data: dead-letter bad records, stop on "
            "other errors | all: dead-letter every record that cannot be converted",
            _one_of(ErrorsTolerance),
        ),
        d("table.topic.errors.dlq.topic", "string", "", "dead-letter topic (default <topic>.dlq)"),
        d(
            "table.topic.expire.snapshots.enable",
            "boolean",
            "true",
            "expire old table snapshots after commits",
            extra_aliases=("automq.table.topic.expire.snapshot.enabled",),
        ),
        d(
            "table.topic.expire.snapshots.older.than.ms",
            "long",
            "3600000",
            "expire snapshots older than this",
            _at_least(0),
        ),
        d(
            "table.topic.expire.snapshots.retain.last",
            "int",
            "1",
            "always keep this many snapshots",
            _at_least(1),
            extra_aliases=("automq.table.topic.expire.snapshot.retain.last",),
        ),
    ]


def register_table_topic_configs(
    registry: TopicConfigRegistry, settings: TableTopicSettings | None = None
) -> None:
    """Teach the broker's config registry the table topic keys (call before broker start)."""
    for d in table_topic_config_defs(settings):
        registry.register(d)


@dataclass(frozen=True)
class TableTopicConfig:
    """The table topic view of one topic's effective config."""

    topic: str
    enabled: bool
    commit_interval_ms: int
    namespace: str
    value_type: ConvertType
    key_type: ConvertType
    value_subject: str
    key_subject: str
    value_message: str
    key_message: str
    transform: TransformType
    partition_by: tuple[PartitionField, ...]
    id_columns: tuple[str, ...]
    upsert: bool
    cdc_field: str
    errors_tolerance: ErrorsTolerance
    dlq_topic: str
    expire_snapshots: bool
    expire_older_than_ms: int
    expire_retain_last: int
    format: TableFormat = TableFormat.ICEBERG

    @classmethod
    def from_topic_config(cls, topic: str, cfg: TopicConfig) -> TableTopicConfig:
        def get(name: str, default: str = "") -> str:
            v = cfg.get(PREFIX + name)
            return default if v is None else v

        def flag(name: str, default: str = "false") -> bool:
            return get(name, default).strip().lower() == "true"

        return cls(
            topic=topic,
            enabled=flag("enable"),
            commit_interval_ms=int(get("commit.interval.ms", "60000")),
            namespace=get("namespace", "default") or "default",
            value_type=ConvertType(get("convert.value.type", "raw").strip().lower()),
            key_type=ConvertType(get("convert.key.type", "raw").strip().lower()),
            value_subject=get("convert.value.subject") or f"{topic}-value",
            key_subject=get("convert.key.subject") or f"{topic}-key",
            value_message=get("convert.value.message.full.name"),
            key_message=get("convert.key.message.full.name"),
            transform=TransformType(get("transform.value.type", "none").strip().lower()),
            partition_by=tuple(parse_partition_by(get("partition.by"))),
            id_columns=tuple(_split_list(get("id.columns"))),
            upsert=flag("upsert.enable"),
            cdc_field=get("cdc.field").strip(),
            errors_tolerance=ErrorsTolerance(
                get("errors.tolerance", "invalid_data").strip().lower()
            ),
            dlq_topic=get("errors.dlq.topic") or f"{topic}.dlq",
            expire_snapshots=flag("expire.snapshots.enable", "true"),
            expire_older_than_ms=int(get("expire.snapshots.older.than.ms", "3600000")),
            expire_retain_last=int(get("expire.snapshots.retain.last", "1")),
            format=TableFormat(get("format", "iceberg").strip().lower()),
        )

    @property
    def keyed(self) -> bool:
        """Rows are matched by id (upsert or CDC)."""
        return bool(self.id_columns) and (
            self.upsert or bool(self.cdc_field) or self.cdc_from_envelope
        )

    @property
    def cdc_from_envelope(self) -> bool:
        return self.transform is TransformType.FLATTEN_DEBEZIUM

    def table_name(self) -> str:
        """The Iceberg table name: the topic name with characters outside [A-Za-z0-9_] as '_'."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.topic)

    def identifier(self) -> tuple[str, ...]:
        return (*self.namespace.split("."), self.table_name())
