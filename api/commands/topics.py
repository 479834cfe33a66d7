"""``tidelake topics``: manage topics over the Kafka protocol (AdminClient)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": args.bootstrap_server,
            "log_level": 0,
            "socket.timeout.ms": int(args.timeout * 1000),
        }
    )


def _parse_configs(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"tidelake: --config expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _fail(exc: BaseException) -> int:
    err = exc.args[0] if exc.args else exc
    text = err.str() if hasattr(err, "str") else str(err)
    print(f"tidelake: {text}", file=sys.stderr)
    return 1


def _create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = _admin(args)
    topic = NewTopic(
        args.topic, args.partitions, args.replication_factor, config=_parse_configs(args.config)
    )
    futures = admin.create_topics(
        [topic], validate_only=args.validate_only, operation_timeout=args.timeout
    )
    try:
        futures[args.topic].result(args.timeout)
    except Exception as exc:
        return _fail(exc)
    verb = "would be created" if args.validate_only else "created"
    print(f"topic {args.topic} {verb}")
    return 0


def _list(args: argparse.Namespace) -> int:
    admin = _admin(args)
    try:
        md = admin.list_topics(timeout=args.timeout)
    except Exception as exc:
        return _fail(exc)
    for name in sorted(md.topics):
        print(name)
    return 0


def _describe(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = _admin(args)
    try:
        md = admin.list_topics(args.topic, timeout=args.timeout)
        t = md.topics[args.topic]
        if t.error is not None:
            print(f"tidelake: {t.error.str()}", file=sys.stderr)
            return 1
        res = ConfigResource(ResourceType.TOPIC, args.topic)
        configs = admin.describe_configs([res])[res].result(args.timeout)
    except Exception as exc:
        return _fail(exc)
    info = {
        "topic": args.topic,
        "partitions": [
            {
                "partition": p.id,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isrs),
            }
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        ],
        "configs": {k: v.value for k, v in sorted(configs.items())},
        "overrides": {k: v.value for k, v in sorted(configs.items()) if not v.is_default},
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"Topic: {args.topic}\tPartitions: {len(info['partitions'])}")
    for p in info["partitions"]:
        print(
            f"  partition {p['partition']}\tleader {p['leader']}\treplicas {p['replicas']}\tisr {p['isr']}"
        )
    print("Configs (overrides marked *):")
    for k, v in info["configs"].items():
        mark = "*" if k in info["overrides"] else " "
        print(f" {mark} {k}={v}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = _admin(args)
    futures = admin.delete_topics([args.topic], operation_timeout=args.timeout)
    try:
        futures[args.topic].result(args.timeout)
    except Exception as exc:
        return _fail(exc)
    print(f"topic {args.topic} deleted")
    return 0


def _alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]

    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in _parse_configs(args.set).items()
    ]
    entries += [
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
        for k in args.delete or []
    ]
    if not entries:
        print("tidelake: nothing to change: give --set KEY=VALUE or --delete KEY", file=sys.stderr)
        return 2
    admin = _admin(args)
    res = ConfigResource(ResourceType.TOPIC, args.topic, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([res])[res].result(args.timeout)
    except Exception as exc:
        return _fail(exc)
    print(f"topic {args.topic} configs updated")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, delete and configure topics",
        description="Manage topics through the broker's Kafka protocol.",
    )
    p.add_argument(
        "--bootstrap-server",
        "-b",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="broker to talk to (default 127.0.0.1:9092)",
    )
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait (default 15)")
    tsub = p.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True

    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("topic")
    c.add_argument("--partitions", "-p", type=int, default=1)
    c.add_argument("--replication-factor", "-r", type=int, default=1)
    c.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)"
    )
    c.add_argument("--validate-only", action="store_true", help="check without creating")
    c.set_defaults(func=_create)

    ls = tsub.add_parser("list", help="list topics")
    ls.set_defaults(func=_list)

    d = tsub.add_parser("describe", help="partitions and configs of a topic")
    d.add_argument("topic")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.set_defaults(func=_describe)

    rm = tsub.add_parser("delete", help="delete a topic")
    rm.add_argument("topic")
    rm.set_defaults(func=_delete)

    a = tsub.add_parser("alter-config", help="set or remove topic configs")
    a.add_argument("topic")
    a.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config (repeatable)")
    a.add_argument(
        "--delete", action="append", metavar="KEY", help="remove an override (repeatable)"
    )
    a.set_defaults(func=_alter)
