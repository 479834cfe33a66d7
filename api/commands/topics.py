"""``tidelake topics``: manage topics over the Kafka protocol (AdminClient)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def _bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else where the platform's settings (``--config``,
    ``--data-dir``, ``TIDELAKE_KAFKA_LISTEN``, ...) say the broker listens."""
    from api.commands.serve import connect_address, settings_from_args

    if not args.bootstrap_server:
        args.bootstrap_server = connect_address(settings_from_args(args).process.kafka_listen)
    return str(args.bootstrap_server)


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Kafka client settings a command connects with: the broker, and what
    ``--command-config FILE`` says (TLS, SASL)."""
    from api.commands.client_config import ClientConfigError, read_client_config

    settings: dict[str, Any] = {}
    path = getattr(args, "command_config", None)
    if path:
        try:
            settings.update(read_client_config(path))
        except ClientConfigError as exc:
            raise SystemExit(f"tidelake: --command-config {path}: {exc}") from None
    settings["bootstrap.servers"] = _bootstrap(args)
    return settings


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            **client_settings(args),
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


def _fail(exc: BaseException, args: argparse.Namespace | None = None) -> int:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else exc
    text = err.str() if hasattr(err, "str") else str(err)
    code = err.code() if hasattr(err, "code") else None
    if args is not None and code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
        text = f"cannot reach the broker at {_bootstrap(args)}: {text}"
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
        return _fail(exc, args)
    verb = "would be created" if args.validate_only else "created"
    print(f"topic {args.topic} {verb}")
    return 0


def _list(args: argparse.Namespace) -> int:
    admin = _admin(args)
    try:
        md = admin.list_topics(timeout=args.timeout)
    except Exception as exc:
        return _fail(exc, args)
    for name in sorted(md.topics):
        print(name)
    return 0


def _describe(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, TopicCollection
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = _admin(args)
    try:
        # DescribeTopics sends Metadata with allow_auto_topic_creation=false:
        # describing a topic never creates it
        t = admin.describe_topics(TopicCollection([args.topic]))[args.topic].result(args.timeout)
        res = ConfigResource(ResourceType.TOPIC, args.topic)
        configs = admin.describe_configs([res])[res].result(args.timeout)
    except Exception as exc:
        err = exc.args[0] if exc.args else None
        if getattr(err, "code", lambda: None)() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            print(f"tidelake: topic {args.topic!r} does not exist", file=sys.stderr)
            return 1
        return _fail(exc, args)
    info = {
        "topic": args.topic,
        "partitions": [
            {
                "partition": p.id,
                "leader": None if p.leader is None else p.leader.id,
                "replicas": [n.id for n in p.replicas],
                "isr": [n.id for n in p.isr],
            }
            for p in sorted(t.partitions, key=lambda p: p.id)
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
        return _fail(exc, args)
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
        return _fail(exc, args)
    print(f"topic {args.topic} configs updated")
    return 0


_COMMAND_CONFIG_HELP = (
    "a properties file of Kafka client settings to connect with (security.protocol, "
    "sasl.mechanism(s), sasl.username/sasl.password or sasl.jaas.config, ssl.ca.location "
    "...), as Kafka's tools take it"
)


def add_command_config(parser: Any, *, again: bool = False) -> None:
    """``--command-config FILE`` (before or after the action)."""
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help=_COMMAND_CONFIG_HELP if not again else "the same as before the action",
        **({"default": argparse.SUPPRESS} if again else {}),
    )


def _bootstrap_again(action: Any) -> None:
    """--bootstrap-server and --command-config after the action too (Kafka's
    tools take them anywhere)."""
    action.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        default=argparse.SUPPRESS,
        help="broker to talk to (the same as before the action)",
    )
    add_command_config(action, again=True)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, delete and configure topics",
        description="Manage topics through the broker's Kafka protocol (an AdminClient). "
        "The broker is --bootstrap-server, else kafka_listen as `tidelake serve` reads it: "
        "--config FILE (before the action for `create`, whose --config sets topic configs), "
        "--data-dir, --set, TIDELAKE_KAFKA_LISTEN; default 127.0.0.1:9092.",
    )
    from api.commands.serve import add_settings_arguments

    p.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        help="broker to talk to (default: kafka_listen of the settings, 127.0.0.1:9092 "
        "unless --config, --data-dir or TIDELAKE_KAFKA_LISTEN say otherwise)",
    )
    add_command_config(p)
    # --config FILE before the action: `topics create --config KEY=VALUE` sets a topic config
    add_settings_arguments(p, config_dest="settings_config")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait (default 15)")
    tsub = p.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True

    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("topic", help="the topic to create")
    c.add_argument("--partitions", "-p", type=int, default=1, help="partitions (default 1)")
    c.add_argument(
        "--replication-factor",
        "-r",
        type=int,
        default=1,
        help="replicas per partition (default 1; storage is shared, so 1 is enough)",
    )
    c.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)"
    )
    c.add_argument("--validate-only", action="store_true", help="check without creating")
    # --config here is a topic config; the config file goes before the action
    add_settings_arguments(c, config_dest="settings_config", again=True)
    _bootstrap_again(c)
    c.set_defaults(func=_create)

    ls = tsub.add_parser("list", help="list topics")
    add_settings_arguments(ls, config_dest="settings_config", again=True)
    _bootstrap_again(ls)
    ls.set_defaults(func=_list)

    d = tsub.add_parser("describe", help="partitions and configs of a topic")
    d.add_argument("topic", help="the topic to describe")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    add_settings_arguments(d, config_dest="settings_config", again=True)
    _bootstrap_again(d)
    d.set_defaults(func=_describe)

    rm = tsub.add_parser("delete", help="delete a topic")
    rm.add_argument("topic", help="the topic to delete")
    add_settings_arguments(rm, config_dest="settings_config", again=True)
    _bootstrap_again(rm)
    rm.set_defaults(func=_delete)

    a = tsub.add_parser("alter-config", help="set or remove topic configs")
    a.add_argument("topic", help="the topic to configure")
    a.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config (repeatable)")
    a.add_argument(
        "--delete", action="append", metavar="KEY", help="remove an override (repeatable)"
    )
    add_settings_arguments(a, config_dest="settings_config", again=True)
    _bootstrap_again(a)
    a.set_defaults(func=_alter)
