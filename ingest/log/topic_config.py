"""Topic configuration: Kafka's names, types, defaults and validation.

The broker knows Kafka's own topic configs. Other rooms (table topics) add
theirs through :meth:`TopicConfigRegistry.register` at process assembly, so the
broker validates every key without importing them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ConfigDef",
    "TopicConfigRegistry",
    "InvalidConfigError",
    "kafka_topic_configs",
    "TopicConfig",
]


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.invalid_config


Validator = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # "string" | "int" | "long" | "boolean" | "list" | "double"
    default: str | None
    doc: str = ""
    validator: Validator | None = None
    aliases: tuple[str, ...] = ()
    sensitive: bool = False

    def validate(self, value: str) -> None:
        if self.type in ("int", "long"):
            try:
                int(value)
            except ValueError:
                raise InvalidConfigError(f"{self.name} must be an integer, got {value!r}") from None
        elif self.type == "double":
            try:
                float(value)
            except ValueError:
                raise InvalidConfigError(f"{self.name} must be a number, got {value!r}") from None
        elif self.type == "boolean" and value.lower() not in ("true", "false"):
            raise InvalidConfigError(f"{self.name} must be true or false, got {value!r}")
        if self.validator is not None:
            self.validator(value)


def _at_least(minimum: int) -> Validator:
    def check(value: str) -> None:
        if int(value) < minimum:
            raise InvalidConfigError(f"value {value} is below the minimum {minimum}")

    return check


def _one_of(*choices: str) -> Validator:
    def check(value: str) -> None:
        items = [v.strip() for v in value.split(",")] if "," in value else [value]
        for item in items:
            if item not in choices:
                raise InvalidConfigError(f"{value!r} is not one of {', '.join(choices)}")

    return check


def _cleanup_policy(value: str) -> None:
    """Kafka's ``ValidList.in("compact", "delete")``: a comma-separated list,
    any order."""
    items = [v.strip() for v in value.split(",")]
    for item in items:
        if item not in ("compact", "delete"):
            raise InvalidConfigError(
                f"Invalid value {value} for configuration cleanup.policy: "
                "String must be one of: compact, delete"
            )


def _ratio(value: str) -> None:
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration min.cleanable.dirty.ratio: "
            "Value must be no more than 1 and at least 0"
        )


_LONG_MAX = str((1 << 63) - 1)


def kafka_topic_configs() -> list[ConfigDef]:
    """Kafka's topic-level configs that Tidelake honours or reports."""
    return [
        ConfigDef(
            "cleanup.policy",
            "list",
            "delete",
            "delete, compact or both (compact,delete): see the README's compacted topics",
            _cleanup_policy,
        ),
        ConfigDef(
            "min.compaction.lag.ms",
            "long",
            "0",
            "records younger than this are never compacted",
            _at_least(0),
        ),
        ConfigDef(
            "max.compaction.lag.ms",
            "long",
            _LONG_MAX,
            "a record older than this is compacted even below min.cleanable.dirty.ratio",
            _at_least(1),
        ),
        ConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            "0.5",
            "compact once this share of the partition's bytes is new since the last pass",
            _ratio,
        ),
        ConfigDef(
            "retention.ms",
            "long",
            "604800000",
            "how long records are kept; -1 for ever",
            _at_least(-1),
        ),
        ConfigDef(
            "retention.bytes",
            "long",
            "-1",
            "partition size above which old records are deleted",
            _at_least(-1),
        ),
        ConfigDef(
            "max.message.bytes", "int", "1048588", "largest record batch accepted", _at_least(0)
        ),
        ConfigDef(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime or LogAppendTime",
            _one_of("CreateTime", "LogAppendTime"),
        ),
        ConfigDef(
            "compression.type",
            "string",
            "producer",
            "batches are kept as the producer sent them",
            _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        ),
        ConfigDef(
            "segment.bytes", "int", "1073741824", "accepted for compatibility", _at_least(14)
        ),
        ConfigDef(
            "segment.ms",
            "long",
            "604800000",
            "accepted (no segments: data is cleanable once it is in object storage)",
            _at_least(1),
        ),
        ConfigDef("min.insync.replicas", "int", "1", "accepted for compatibility", _at_least(1)),
        ConfigDef(
            "unclean.leader.election.enable", "boolean", "false", "accepted for compatibility"
        ),
        ConfigDef(
            "message.timestamp.difference.max.ms",
            "long",
            "9223372036854775807",
            "accepted",
            _at_least(0),
        ),
        ConfigDef(
            "message.timestamp.before.max.ms",
            "long",
            "9223372036854775807",
            "accepted",
            _at_least(0),
        ),
        ConfigDef(
            "message.timestamp.after.max.ms",
            "long",
            "9223372036854775807",
            "accepted",
            _at_least(0),
        ),
        ConfigDef(
            "delete.retention.ms",
            "long",
            "86400000",
            "how long compaction keeps a tombstone (and a transaction marker) it has seen",
            _at_least(0),
        ),
        ConfigDef(
            "flush.messages",
            "long",
            "9223372036854775807",
            "accepted (the WAL always fsyncs)",
            _at_least(1),
        ),
        ConfigDef(
            "flush.ms",
            "long",
            "9223372036854775807",
            "accepted (the WAL always fsyncs)",
            _at_least(0),
        ),
        *_accepted_for_compatibility(),
    ]


def _between(low: int, high: int, *also: int) -> Validator:
    def check(value: str) -> None:
        if not (low <= int(value) <= high or int(value) in also):
            raise InvalidConfigError(f"value {value} is not in [{low}, {high}]")

    return check


def _throttled_replicas(value: str) -> None:
    """Kafka's ``partition:broker,...`` list, or ``*``."""
    if value.strip() in ("", "*"):
        return
    for item in value.split(","):
        parts = item.strip().split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise InvalidConfigError(
                f"{value!r} must be a list of partition:broker pairs, or the wildcard *"
            )


def _accepted_for_compatibility() -> list[ConfigDef]:
    """Kafka's other topic configs: accepted and reported with Kafka's default
    and range, so that a tool or test that sets them (librdkafka's own
    compaction test sets ``file.delete.delay.ms``) works, though they
    describe local segment files, replication or tiered storage, which a
    broker over shared object storage does not have."""
    local = "accepted for compatibility (no local segment files)"
    return [
        ConfigDef("compression.gzip.level", "int", "-1", "accepted", _between(1, 9, -1)),
        ConfigDef("compression.lz4.level", "int", "9", "accepted", _between(1, 17)),
        ConfigDef("compression.zstd.level", "int", "3", "accepted", _between(-131072, 22)),
        ConfigDef("file.delete.delay.ms", "long", "60000", local, _at_least(0)),
        ConfigDef("index.interval.bytes", "int", "4096", local, _at_least(0)),
        ConfigDef("segment.index.bytes", "int", "10485760", local, _at_least(4)),
        ConfigDef("segment.jitter.ms", "long", "0", local, _at_least(0)),
        ConfigDef("preallocate", "boolean", "false", local),
        ConfigDef(
            "leader.replication.throttled.replicas",
            "list",
            "",
            "accepted (storage is shared: no replication to throttle)",
            _throttled_replicas,
        ),
        ConfigDef(
            "follower.replication.throttled.replicas",
            "list",
            "",
            "accepted (storage is shared: no replication to throttle)",
            _throttled_replicas,
        ),
        ConfigDef(
            "remote.storage.enable",
            "boolean",
            "false",
            "accepted (every topic lives in object storage)",
        ),
        ConfigDef("local.retention.ms", "long", "-2", "accepted (tiered storage)", _at_least(-2)),
        ConfigDef(
            "local.retention.bytes", "long", "-2", "accepted (tiered storage)", _at_least(-2)
        ),
        ConfigDef("remote.log.copy.disable", "boolean", "false", "accepted (tiered storage)"),
        ConfigDef("remote.log.delete.on.disable", "boolean", "false", "accepted (tiered storage)"),
        ConfigDef("message.downconversion.enable", "boolean", "true", "accepted"),
        ConfigDef("message.format.version", "string", "3.0-IV1", "accepted (deprecated in Kafka)"),
    ]


@dataclass
class TopicConfigRegistry:
    """Every topic config the broker accepts, by name (aliases resolved)."""

    defs: dict[str, ConfigDef] = field(default_factory=dict)
    _aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls) -> TopicConfigRegistry:
        reg = cls()
        for d in kafka_topic_configs():
            reg.register(d)
        return reg

    def register(self, d: ConfigDef) -> None:
        self.defs[d.name] = d
        for a in d.aliases:
            self._aliases[a] = d.name

    def canonical(self, name: str) -> str:
        return self._aliases.get(name, name)

    def validate(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """Validate overrides; returns them keyed by canonical name. None values are dropped."""
        out: dict[str, str] = {}
        for name, value in configs.items():
            key = self.canonical(name)
            d = self.defs.get(key)
            if d is None:
                raise InvalidConfigError(f"unknown topic config {name!r}")
            if value is None:
                continue
            d.validate(value)
            out[key] = value
        lo, hi = out.get("min.compaction.lag.ms"), out.get("max.compaction.lag.ms")
        if lo is not None and hi is not None and int(lo) > int(hi):
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                f"max.compaction.lag.ms ({hi})"
            )
        return out

    def resolved(self, overrides: Mapping[str, str]) -> TopicConfig:
        return TopicConfig(self, dict(overrides))

    def names(self) -> Iterable[str]:
        return self.defs.keys()


_UNBOUNDED_MS = (1 << 63) - 1


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective configuration: its overrides over the defaults.

    Immutable: a topic whose configs change gets a new one. So every value is
    looked up once and remembered: the produce path reads several per append.
    """

    registry: TopicConfigRegistry
    overrides: dict[str, str]
    _memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def get(self, name: str) -> str | None:
        memo = self._memo
        if name in memo:
            return memo[name]  # type: ignore[no-any-return]
        key = self.registry.canonical(name)
        if key in self.overrides:
            value: str | None = self.overrides[key]
        else:
            d = self.registry.defs.get(key)
            value = d.default if d else None
        memo[name] = value
        return value

    def get_int(self, name: str) -> int:
        v = self.get(name)
        return int(v) if v is not None else 0

    @property
    def retention_ms(self) -> int:
        return self.get_int("retention.ms")

    @property
    def retention_bytes(self) -> int:
        return self.get_int("retention.bytes")

    @cached_property
    def max_message_bytes(self) -> int:
        return self.get_int("max.message.bytes")

    @cached_property
    def cleanup_policy(self) -> frozenset[str]:
        return frozenset(v.strip() for v in (self.get("cleanup.policy") or "delete").split(","))

    @cached_property
    def compact(self) -> bool:
        """cleanup.policy holds compact: the log cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy

    @cached_property
    def delete(self) -> bool:
        """cleanup.policy holds delete: retention.ms / retention.bytes apply."""
        return "delete" in self.cleanup_policy

    def get_float(self, name: str) -> float:
        v = self.get(name)
        return float(v) if v is not None else 0.0

    @cached_property
    def timestamp_bounds(self) -> tuple[int, int] | None:
        """How far (ms) a CreateTime record may be before and after the
        broker's clock (message.timestamp.{before,after,difference}.max.ms),
        or None when both are unbounded, the default: the produce path reads
        this per append."""
        diff = self.get_int("message.timestamp.difference.max.ms")
        before = min(diff, self.get_int("message.timestamp.before.max.ms"))
        after = min(diff, self.get_int("message.timestamp.after.max.ms"))
        if before >= _UNBOUNDED_MS and after >= _UNBOUNDED_MS:
            return None
        return before, after

    @cached_property
    def log_append_time(self) -> bool:
        return self.get("message.timestamp.type") == "LogAppendTime"
