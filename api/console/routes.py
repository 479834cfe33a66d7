"""The console's JSON endpoints under ``/api/v1`` (typed: they stay in the
OpenAPI document). They read the broker's in-memory state on the event loop
and do store I/O in threads."""

from __future__ import annotations

import asyncio
import difflib
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, HTTPException, Query

from api.cluster_reads import peer_endpoint
from api.cluster_reads.browse import browse_remote
from api.console.decode import FieldDecoder
from api.console.history import HistorySampler
from api.console.models import (
    DiffLine,
    GroupDetail,
    GroupList,
    GroupMember,
    GroupOffset,
    GroupSummary,
    History,
    MemberAssignment,
    Message,
    MessageHeader,
    MessagePage,
    PartitionDetail,
    SchemaDiff,
    SchemaVersion,
    SubjectSummary,
    TopicDetail,
    TopicSummary,
)
from api.metrics.lag import group_lags
from ingest.protocol.records import decode_records

if TYPE_CHECKING:
    from api.cluster_reads import ClusterReads
    from ingest.broker import Broker
    from ingest.log.manager import Topic

__all__ = ["create_console_api"]

StatusSource = Callable[[], list[dict[str, Any]]]
_MAX_MESSAGES = 500


def _table_link(
    topic: Topic, rows: dict[str, dict[str, Any]]
) -> tuple[bool, str | None, str | None]:
    cfg = topic.config
    enabled = cfg is not None and (cfg.get("table.topic.enable") or "").lower() == "true"
    if not enabled:
        return False, None, None
    row = rows.get(topic.name, {})
    table = row.get("table")
    if table is None and cfg is not None:
        ns = cfg.get("table.topic.namespace") or "default"
        table = f"{ns}.{re.sub(r'[^A-Za-z0-9_]', '_', topic.name)}"
    dlq = (cfg.get("table.topic.errors.dlq.topic") if cfg else None) or f"{topic.name}.dlq"
    return True, str(table), dlq


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def create_console_api(
    broker: Broker,
    reads: ClusterReads,
    table_status: StatusSource | None,
    registry: Any | None,
    history: HistorySampler,
) -> APIRouter:
    r = APIRouter(prefix="/api/v1", tags=["console"])
    decoder = FieldDecoder(registry)

    def status_rows() -> dict[str, dict[str, Any]]:
        return {str(row["topic"]): row for row in (table_status() if table_status else [])}

    async def _topic_bytes_in() -> dict[str, float]:
        """Produced bytes/s per topic: in a cluster from every leader's last
        load report (the balancer's figures, a few seconds old), else this
        broker's own rate."""
        member = getattr(broker, "member", None)
        if member is None:
            return dict(history.topic_bytes_in_per_s)
        out: dict[str, float] = {}
        for (topic, _), load in (await member.partition_loads()).items():
            out[topic] = out.get(topic, 0.0) + load.in_bps
        return out

    def topic_or_404(name: str) -> Topic:
        topic = broker.logs.get(name)
        if topic is None or topic.config is None:
            raise HTTPException(404, f"topic {name!r} does not exist")
        return topic

    @r.get(
        "/topic-summaries",
        summary="Topics: partitions, messages, size, bytes/s, retention (cluster-wide: "
        "each partition as its leader answers)",
    )
    async def topic_summaries() -> list[TopicSummary]:
        rows = status_rows()
        topics = [(n, t) for n, t in sorted(broker.logs.topics.items()) if t.config is not None]
        every = [(n, p) for n, t in topics for p in range(t.partition_count)]
        (states, _), (sizes, _) = await asyncio.gather(
            reads.partitions(every, earliest=True), reads.partition_sizes(every)
        )
        bytes_in = await _topic_bytes_in()
        out = []
        for name, topic in topics:
            assert topic.config is not None
            enabled, table, dlq = _table_link(topic, rows)
            messages = 0
            for p in range(topic.partition_count):
                ends = states[(name, p)].ends
                if ends.high_watermark is not None and ends.log_start_offset is not None:
                    messages += ends.high_watermark - ends.log_start_offset
            out.append(
                TopicSummary(
                    name=name,
                    partitions=topic.partition_count,
                    messages=messages,
                    size_bytes=sum(sizes.get((name, p), 0) for p in range(topic.partition_count)),
                    size_partial=any((name, p) not in sizes for p in range(topic.partition_count)),
                    bytes_in_per_s=bytes_in.get(name, 0.0),
                    messages_per_s=history.topic_messages_per_s.get(name, 0.0),
                    retention_ms=topic.config.retention_ms,
                    table_topic=enabled,
                    table=table,
                    dead_letter_topic=dlq,
                )
            )
        return out

    @r.get(
        "/topics/{name}/detail",
        summary="A topic's partitions (leader, offsets from the leader, size if led here) "
        "and effective configs",
    )
    async def topic_detail(name: str) -> TopicDetail:
        topic = topic_or_404(name)
        assert topic.config is not None
        _, table, dlq = _table_link(topic, status_rows())
        configs = {
            n: v
            for n in sorted(broker.logs.configs.names())
            if (v := topic.config.get(n)) is not None
        }
        every = [(name, p) for p in range(topic.partition_count)]
        (states, unreachable), (sizes, no_sizes) = await asyncio.gather(
            reads.partitions(every, earliest=True), reads.partition_sizes(every)
        )
        unreachable = sorted({*unreachable, *no_sizes})
        partitions = []
        for index in range(topic.partition_count):
            state = states[(name, index)]
            partitions.append(
                PartitionDetail(
                    partition=index,
                    leader=state.leader,
                    led_here=index in topic.logs,
                    log_start_offset=state.ends.log_start_offset,
                    high_watermark=state.ends.high_watermark,
                    size_bytes=sizes.get((name, index)),
                )
            )
        return TopicDetail(
            name=name,
            topic_id=str(topic.topic_id),
            partitions=partitions,
            configs=configs,
            overrides=sorted(topic.config.overrides),
            table=table,
            dead_letter_topic=dlq,
            unreachable_brokers=unreachable,
        )

    @r.get(
        "/topics/{name}/messages",
        summary="Records of one partition from an offset or a timestamp (ms), decoded",
    )
    async def messages(
        name: str,
        partition: int = Query(0, ge=0),
        offset: int | None = Query(None, ge=0),
        timestamp: int | None = Query(None, ge=0, description="first record at or after (ms)"),
        limit: int = Query(50, ge=1, le=_MAX_MESSAGES),
        isolation: Literal["read_committed", "read_uncommitted"] = Query(
            "read_committed",
            description="read_committed: up to the last stable offset, without aborted "
            "transactions' records; read_uncommitted: everything",
        ),
    ) -> MessagePage:
        topic_or_404(name)
        committed = isolation == "read_committed"
        plog = broker.logs.partition(name, partition)
        raw: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
        if plog is None:  # led by another broker of the cluster: asked of it
            if not broker.logs.has_partition(name, partition):
                raise HTTPException(404, f"partition {name}-{partition} does not exist")
            leader, _ = broker.cluster.leader(name, partition)
            endpoint = next(
                (
                    peer_endpoint(broker, b)
                    for b in broker.cluster.brokers()
                    if b.node_id == leader and leader != broker.cluster.node_id
                ),
                None,
            )
            if endpoint is None:
                raise HTTPException(503, f"partition {name}-{partition} has no live leader now")
            try:
                page = await browse_remote(
                    endpoint,
                    (name, partition),
                    offset,
                    timestamp,
                    limit,
                    committed,
                    reads.timeout_s,
                    broker.peer_security,
                )
            except Exception as exc:  # noqa: BLE001 - the leader did not answer: say so
                raise HTTPException(
                    503, f"broker {leader} (leader of {name}-{partition}) did not answer: {exc!r}"
                ) from exc
            start, hw = page.start_offset, page.high_watermark
            raw = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in page.records]
        else:
            hw = plog.high_watermark
            if timestamp is not None:
                found, _ = await plog.offset_for(timestamp)
                start = hw if found < 0 else found
            else:
                start = plog.log_start_offset if offset is None else offset
            start = max(start, plog.log_start_offset)
            async for view, header, _end in plog.scan(start, committed_only=committed):
                if header.is_control:  # transaction markers are not messages
                    continue
                for rec in decode_records(view, header):
                    if rec.offset >= start:
                        raw.append(
                            (rec.offset, rec.timestamp, rec.key, rec.value, list(rec.headers))
                        )
                if len(raw) >= limit:
                    break
            raw = raw[:limit]

        def decode_all() -> list[Message]:
            return [
                Message(
                    partition=partition,
                    offset=o,
                    timestamp=ts,
                    key=decoder.decode(k),
                    value=decoder.decode(v),
                    headers=[MessageHeader(key=hk, value=decoder.decode(hv)) for hk, hv in hs],
                )
                for o, ts, k, v, hs in raw
            ]

        decoded = await asyncio.to_thread(decode_all)
        return MessagePage(
            topic=name,
            partition=partition,
            start_offset=start,
            next_offset=decoded[-1].offset + 1 if decoded else start,
            high_watermark=hw,
            messages=decoded,
        )

    @r.get(
        "/groups",
        summary="Every consumer group of the cluster with its coordinator and total lag",
    )
    async def groups() -> GroupList:
        listing = await reads.list_groups()
        names = [g.group_id for g in listing.groups]
        described, unreachable = await reads.describe_groups(names)
        lags = await group_lags(broker, reads, names)
        out = []
        for g in listing.groups:
            mine = [p for p in lags if p.group == g.group_id]
            d = described.get(g.group_id)
            out.append(
                GroupSummary(
                    group_id=g.group_id,
                    state=g.state,
                    protocol_type=g.protocol_type,
                    group_type=g.group_type,
                    coordinator=g.coordinator,
                    coordinator_answered=g.coordinator_answered and d is not None,
                    members=len(d.members) if d is not None else 0,
                    topics=sorted({p.topic for p in mine}),
                    lag=sum(p.lag or 0 for p in mine),
                )
            )
        return GroupList(
            groups=out, unreachable_brokers=sorted({*listing.unreachable, *unreachable})
        )

    @r.get(
        "/groups/{group_id}",
        summary="Members, assignment, committed offsets and lag (from the group's "
        "coordinator and the partitions' leaders)",
    )
    async def group(group_id: str) -> GroupDetail:
        coordinator = reads.coordinator(group_id)
        described, unreachable = await reads.describe_groups([group_id])
        d = described.get(group_id)
        lags = await group_lags(broker, reads, [group_id])
        if d is not None and d.state == "Dead" and not lags:
            raise HTTPException(404, f"group {group_id!r} does not exist")
        members = [
            GroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                group_instance_id=m.instance_id,
                assignment=[
                    MemberAssignment(topic=t, partitions=list(ps)) for t, ps in m.assignment
                ],
            )
            for m in (d.members if d is not None else ())
        ]
        owner = {
            (a.topic, p): m.member_id for m in members for a in m.assignment for p in a.partitions
        }
        offsets = [
            GroupOffset(
                topic=p.topic,
                partition=p.partition,
                committed=p.committed,
                high_watermark=p.high_watermark,
                lag=p.lag,
                member_id=owner.get((p.topic, p.partition)),
            )
            for p in lags
        ]
        if any(p.high_watermark is None for p in lags):
            _, missing = await reads.partitions(
                [(p.topic, p.partition) for p in lags if p.high_watermark is None]
            )
            unreachable = [*unreachable, *missing]
        return GroupDetail(
            group_id=group_id,
            state=d.state if d is not None else "Unknown",
            protocol_type=d.protocol_type if d is not None else "",
            protocol=d.protocol if d is not None else "",
            coordinator=coordinator,
            coordinator_answered=d is not None,
            members=members,
            offsets=offsets,
            lag=sum(o.lag or 0 for o in offsets),
            unreachable_brokers=sorted(set(unreachable)),
        )

    def need_registry() -> Any:
        if registry is None:
            raise HTTPException(503, "no schema registry store is configured")
        return registry

    def compatibility(reg: Any, subject: str) -> str:
        return str(reg.get_config(subject, default_to_global=True).get("compatibilityLevel", ""))

    @r.get("/schemas/subjects", summary="Subjects with versions, type and compatibility level")
    async def subjects() -> list[SubjectSummary]:
        reg = need_registry()

        def read() -> list[SubjectSummary]:
            out = []
            for subject in reg.list_subjects():
                latest = reg.get_version(subject, "latest")
                out.append(
                    SubjectSummary(
                        subject=subject,
                        versions=reg.list_versions(subject),
                        latest_id=int(latest["id"]),
                        schema_type=str(latest.get("schemaType", "AVRO")),
                        compatibility=compatibility(reg, subject),
                    )
                )
            return out

        return await asyncio.to_thread(read)

    def version(reg: Any, subject: str, v: str) -> SchemaVersion:
        try:
            body = reg.get_version(subject, v)
        except Exception as exc:  # the registry's NotFound errors
            raise HTTPException(404, str(exc)) from exc
        return SchemaVersion(
            subject=subject,
            version=int(body["version"]),
            id=int(body["id"]),
            schema_type=str(body.get("schemaType", "AVRO")),
            schema_text=_pretty(str(body["schema"])),
            compatibility=compatibility(reg, subject),
        )

    @r.get("/schemas/subjects/{subject}/versions/{v}", summary="One version's schema text")
    async def schema_version(subject: str, v: str) -> SchemaVersion:
        reg = need_registry()
        return await asyncio.to_thread(version, reg, subject, v)

    @r.get("/schemas/subjects/{subject}/diff", summary="Line diff between two versions")
    async def schema_diff(
        subject: str,
        from_version: int = Query(..., alias="from", ge=1),
        to_version: int = Query(..., alias="to", ge=1),
    ) -> SchemaDiff:
        reg = need_registry()
        a = await asyncio.to_thread(version, reg, subject, str(from_version))
        b = await asyncio.to_thread(version, reg, subject, str(to_version))
        lines = []
        for line in difflib.ndiff(a.schema_text.splitlines(), b.schema_text.splitlines()):
            if line[:1] in (" ", "+", "-"):
                lines.append(DiffLine(op=line[0], text=line[2:]))
        return SchemaDiff(
            subject=subject, from_version=a.version, to_version=b.version, lines=lines
        )

    @r.get("/history", summary="Series sampled every few seconds: lag, freshness, rows/s, bytes/s")
    async def series() -> History:
        return history.history()

    return r
