"""``tidelake groups``: list and describe consumer groups over the Kafka
protocol (an AdminClient), so a cluster answers whole: ListGroups goes to
every broker, DescribeGroups / ConsumerGroupDescribe and OffsetFetch to each
group's coordinator, ListOffsets to each partition's leader."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from api.commands.topics import _admin, _bootstrap_again, _fail, add_command_config

__all__ = ["register"]


def _name(value: Any) -> str:
    """An enum of confluent-kafka (state, type) as Kafka writes it."""
    text = str(getattr(value, "name", value))
    return "".join(w.capitalize() for w in text.split("_")) if text.isupper() else text


def _describe_all(admin: Any, ids: list[str], timeout: float) -> dict[str, Any]:
    if not ids:
        return {}
    futures = admin.describe_consumer_groups(ids, request_timeout=timeout)
    return {g: f.result(timeout) for g, f in futures.items()}


def _offsets(admin: Any, group: str, timeout: float) -> list[dict[str, Any]]:
    """Committed offset, end offset (the leader's high watermark) and lag per partition."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )
    committed = [tp for tp in futures[group].result(timeout).topic_partitions if tp.offset >= 0]
    if not committed:
        return []
    ends = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in committed},  # type: ignore[no-untyped-call]
        request_timeout=timeout,
    )
    out = []
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        end = next(v for k, v in ends.items() if (k.topic, k.partition) == (tp.topic, tp.partition))
        hw = end.result(timeout).offset
        out.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed": tp.offset,
                "end_offset": hw,
                "lag": max(0, hw - tp.offset),
            }
        )
    return out


def _list(args: argparse.Namespace) -> int:
    admin = _admin(args)
    try:
        listed = admin.list_consumer_groups(request_timeout=args.timeout).result(args.timeout)
        ids = sorted(g.group_id for g in listed.valid)
        described = _describe_all(admin, ids, args.timeout)
        rows = []
        for g in ids:
            d = described[g]
            offsets = _offsets(admin, g, args.timeout)
            rows.append(
                {
                    "group": g,
                    "type": _name(d.type),
                    "state": _name(d.state),
                    "coordinator": d.coordinator.id,
                    "members": len(d.members),
                    "lag": sum(o["lag"] for o in offsets),
                }
            )
    except Exception as exc:
        return _fail(exc, args)
    if listed.errors:
        print(f"tidelake: some brokers did not answer: {listed.errors}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("GROUP\tTYPE\tSTATE\tCOORDINATOR\tMEMBERS\tLAG")
    for r in rows:
        print(
            f"{r['group']}\t{r['type']}\t{r['state']}\t{r['coordinator']}\t{r['members']}\t{r['lag']}"
        )
    return 1 if listed.errors else 0


def _describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    try:
        d = _describe_all(admin, [args.group], args.timeout)[args.group]
        offsets = _offsets(admin, args.group, args.timeout)
    except Exception as exc:
        return _fail(exc, args)
    state = _name(d.state)
    if state == "Dead" and not offsets:
        print(f"tidelake: group {args.group!r} does not exist", file=sys.stderr)
        return 1
    info = {
        "group": args.group,
        "type": _name(d.type),
        "state": state,
        "coordinator": d.coordinator.id,
        "assignor": d.partition_assignor,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": sorted(
                    [tp.topic, tp.partition] for tp in m.assignment.topic_partitions
                ),
            }
            for m in d.members
        ],
        "offsets": offsets,
        "lag": sum(o["lag"] for o in offsets),
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(
        f"Group: {args.group}\tType: {info['type']}\tState: {state}\t"
        f"Coordinator: {info['coordinator']}\tLag: {info['lag']}"
    )
    for m in info["members"]:
        parts = ", ".join(f"{t}-{p}" for t, p in m["assignment"])
        print(f"  member {m['member_id']}\tclient {m['client_id']}\thost {m['host']}\t[{parts}]")
    print("TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG")
    for o in offsets:
        print(f"{o['topic']}\t{o['partition']}\t{o['committed']}\t{o['end_offset']}\t{o['lag']}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "groups",
        help="list and describe consumer groups (members, committed offsets, lag)",
        description="Consumer groups through the broker's Kafka protocol (an AdminClient): "
        "in a cluster every broker's groups, each described by its coordinator, with lag "
        "against each partition's leader. The broker is --bootstrap-server, else "
        "kafka_listen as `tidelake serve` reads it (--config, --data-dir, --set, "
        "TIDELAKE_KAFKA_LISTEN; default 127.0.0.1:9092).",
    )
    from api.commands.serve import add_settings_arguments

    p.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        help="broker to talk to (default: kafka_listen of the settings, 127.0.0.1:9092)",
    )
    add_command_config(p)
    add_settings_arguments(p, config_dest="settings_config")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait (default 15)")
    gsub = p.add_subparsers(dest="action", metavar="ACTION")
    gsub.required = True

    ls = gsub.add_parser("list", help="every group: type, state, coordinator, members, lag")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    add_settings_arguments(ls, config_dest="settings_config", again=True)
    _bootstrap_again(ls)
    ls.set_defaults(func=_list)

    d = gsub.add_parser("describe", help="a group's members, assignment and lag per partition")
    d.add_argument("group", help="the consumer group")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    add_settings_arguments(d, config_dest="settings_config", again=True)
    _bootstrap_again(d)
    d.set_defaults(func=_describe)
