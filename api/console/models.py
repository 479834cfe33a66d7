"""Typed bodies of the console's JSON endpoints (kept in the OpenAPI document)."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = [
    "TopicSummary",
    "PartitionDetail",
    "TopicDetail",
    "DecodedField",
    "MessageHeader",
    "Message",
    "MessagePage",
    "GroupSummary",
    "GroupList",
    "GroupMember",
    "MemberAssignment",
    "GroupOffset",
    "GroupDetail",
    "SubjectSummary",
    "SchemaVersion",
    "DiffLine",
    "SchemaDiff",
    "HistorySample",
    "History",
]


class TopicSummary(BaseModel):
    name: str
    partitions: int
    messages: int  # high watermark - log start offset, summed (asked of each partition's leader)
    size_bytes: int  # retained bytes, each partition's as its leader answers (DescribeLogDirs)
    size_partial: bool = False  # a leader did not answer (or a partition has none): not counted
    bytes_in_per_s: float
    messages_per_s: float
    retention_ms: int
    table_topic: bool
    table: str | None = None
    dead_letter_topic: str | None = None


class PartitionDetail(BaseModel):
    partition: int
    leader: int  # node id; -1 while the partition has none
    led_here: bool  # by the broker serving this page (its size and messages are browsable here)
    log_start_offset: int | None  # None: the leader did not answer
    high_watermark: int | None
    size_bytes: int | None  # as its leader answers; None: the leader did not answer


class TopicDetail(BaseModel):
    name: str
    topic_id: str
    partitions: list[PartitionDetail]
    configs: dict[str, str]  # effective value of every config
    overrides: list[str]  # names set on the topic itself
    table: str | None = None
    dead_letter_topic: str | None = None
    unreachable_brokers: list[int] = []  # leaders that did not answer


class DecodedField(BaseModel):
    format: str  # null | text | json | avro | json-schema | protobuf | binary
    text: str | None = None
    schema_id: int | None = None
    subject: str | None = None
    error: str | None = None


class MessageHeader(BaseModel):
    key: str
    value: DecodedField


class Message(BaseModel):
    partition: int
    offset: int
    timestamp: int
    key: DecodedField
    value: DecodedField
    headers: list[MessageHeader]


class MessagePage(BaseModel):
    topic: str
    partition: int
    start_offset: int
    next_offset: int
    high_watermark: int
    messages: list[Message]


class GroupSummary(BaseModel):
    group_id: str
    state: str  # "Unknown" when its coordinator did not answer
    protocol_type: str
    group_type: str  # classic | consumer (KIP-848)
    coordinator: int  # node id of the broker that coordinates it
    coordinator_answered: bool
    members: int
    topics: list[str]
    lag: int


class GroupList(BaseModel):
    """Every consumer group of the cluster; brokers that did not answer are
    named (their groups may be missing or shown as Unknown)."""

    groups: list[GroupSummary]
    unreachable_brokers: list[int]


class MemberAssignment(BaseModel):
    topic: str
    partitions: list[int]


class GroupMember(BaseModel):
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: list[MemberAssignment]


class GroupOffset(BaseModel):
    topic: str
    partition: int
    committed: int
    high_watermark: int | None
    lag: int | None
    member_id: str | None = None


class GroupDetail(BaseModel):
    group_id: str
    state: str  # "Unknown" when its coordinator did not answer
    protocol_type: str
    protocol: str
    coordinator: int
    coordinator_answered: bool
    members: list[GroupMember]
    offsets: list[GroupOffset]
    lag: int
    unreachable_brokers: list[int] = []  # the coordinator or partition leaders that did not answer


class SubjectSummary(BaseModel):
    subject: str
    versions: list[int]
    latest_id: int
    schema_type: str
    compatibility: str


class SchemaVersion(BaseModel):
    subject: str
    version: int
    id: int
    schema_type: str
    schema_text: str  # pretty-printed when it is JSON (Avro, JSON Schema)
    compatibility: str


class DiffLine(BaseModel):
    op: str  # " " same, "+" added in ``to``, "-" removed from ``from``
    text: str


class SchemaDiff(BaseModel):
    subject: str
    from_version: int
    to_version: int
    lines: list[DiffLine]


class HistorySample(BaseModel):
    at_ms: int
    bytes_in_per_s: float
    group_lag: dict[str, int]
    table_freshness_ms: dict[str, int | None]
    table_rows_per_second: dict[str, float]


class History(BaseModel):
    interval_s: float
    samples: list[HistorySample]
