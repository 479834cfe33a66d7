"""``tidelake acls add|remove|list``: ACL bindings in the metadata store.

Like Kafka's ``kafka-acls --bootstrap-server ...`` but written to the
metadata store directly, as ``tidelake users`` writes credentials: every
broker sharing the store applies a change within its
``acl_refresh_interval_ms`` (1 s by default). Over the Kafka protocol, any
admin client's CreateAcls / DescribeAcls / DeleteAcls does the same.

    tidelake acls add --allow User:alice --operation read --operation write --topic orders
    tidelake acls add --allow User:alice --operation read --group app- --prefixed
    tidelake acls add --deny User:bob --operation all --topic secret
    tidelake acls list [--principal User:alice] [--topic orders] [--json]
    tidelake acls remove --principal User:alice --topic orders
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = ["register"]

_OPERATIONS = (
    "all",
    "read",
    "write",
    "create",
    "delete",
    "alter",
    "describe",
    "cluster_action",
    "describe_configs",
    "alter_configs",
    "idempotent_write",
)


def _resource_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--topic", help="a topic (or a prefix with --prefixed; * for every topic)")
    g.add_argument("--group", help="a consumer group (or a prefix with --prefixed)")
    g.add_argument("--transactional-id", help="a transactional id (or a prefix with --prefixed)")
    g.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument("--prefixed", action="store_true", help="the name is a prefix (KIP-290)")


def register(sub: Any) -> None:
    p = sub.add_parser("acls", help="manage ACLs (checked when the broker's authorizer is acl)")
    asub = p.add_subparsers(dest="acls_command", metavar="COMMAND")
    asub.required = True
    a = asub.add_parser(
        "add",
        help="allow or deny principals operations on a resource",
        description="Adds one binding per principal and operation.",
    )
    add_settings_arguments(a)
    who = a.add_mutually_exclusive_group(required=True)
    who.add_argument("--allow", action="append", metavar="PRINCIPAL", help="User:NAME or User:*")
    who.add_argument("--deny", action="append", metavar="PRINCIPAL", help="User:NAME or User:*")
    a.add_argument("--operation", action="append", required=True, choices=_OPERATIONS)
    a.add_argument("--host", default="*", help="the client address the binding applies to")
    _resource_arguments(a)
    a.set_defaults(func=_add)
    r = asub.add_parser(
        "remove", help="remove the bindings that match (omitted options match everything)"
    )
    add_settings_arguments(r)
    r.add_argument("--principal")
    r.add_argument("--operation", choices=_OPERATIONS)
    r.add_argument("--host")
    _resource_arguments(r)
    r.set_defaults(func=_remove)
    ls = asub.add_parser("list", help="list the bindings that match")
    add_settings_arguments(ls)
    ls.add_argument("--principal")
    _resource_arguments(ls)
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=_list)


def _store(args: argparse.Namespace) -> tuple[Any, Any]:
    from ingest.metadata import open_metadata_store
    from ingest.security.acl import MetadataAclStore

    settings = settings_from_args(args)
    store = open_metadata_store(settings.metadata_url)
    return store, MetadataAclStore(store)


def _resource(args: argparse.Namespace) -> tuple[Any, str | None]:
    from ingest.security.acl import ResourceType
    from ingest.security.acl.model import CLUSTER_NAME

    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return None, None


def _filter(args: argparse.Namespace) -> Any:
    from ingest.security.acl import (
        AclBindingFilter,
        AclOperation,
        PatternType,
        ResourceType,
    )

    kind, name = _resource(args)
    pattern = PatternType.ANY
    if name is not None:
        pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    operation = getattr(args, "operation", None)
    return AclBindingFilter(
        kind if kind is not None else ResourceType.ANY,
        name,
        pattern,
        args.principal,
        getattr(args, "host", None),
        AclOperation[operation.upper()] if operation else AclOperation.ANY,
    )


def _add(args: argparse.Namespace) -> int:
    from ingest.security.acl import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        InvalidAcl,
        PatternType,
    )

    kind, name = _resource(args)
    if kind is None or name is None:
        print(
            "tidelake: name a resource: --topic, --group, --transactional-id or --cluster",
            file=sys.stderr,
        )
        return 2
    permission = AclPermissionType.ALLOW if args.allow else AclPermissionType.DENY
    principals = args.allow or args.deny
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    bindings = [
        AclBinding(kind, name, pattern, who, args.host, AclOperation[op.upper()], permission)
        for who in principals
        for op in dict.fromkeys(args.operation)
    ]
    try:
        for b in bindings:
            b.validate()
    except InvalidAcl as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 2
    store, acls = _store(args)
    try:
        for b in bindings:
            acls.add(b)
    finally:
        store.close()
    for b in bindings:
        print(f"added {_line(b)}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    store, acls = _store(args)
    try:
        gone = acls.remove(_filter(args))
    finally:
        store.close()
    if not gone:
        print("tidelake: no ACL matches", file=sys.stderr)
        return 1
    for b in gone:
        print(f"removed {_line(b)}")
    return 0


def _line(b: Any) -> str:
    return (
        f"{b.permission.name} {b.principal} {b.operation.name} from {b.host} on "
        f"{b.resource_type.name} {b.pattern_type.name} {b.resource_name!r}"
    )


def _list(args: argparse.Namespace) -> int:
    store, acls = _store(args)
    try:
        bindings = acls.list(_filter(args))
    finally:
        store.close()
    if args.json:
        rows = [
            {
                "resource_type": b.resource_type.name,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type.name,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation.name,
                "permission": b.permission.name,
            }
            for b in bindings
        ]
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'resource':<34} {'pattern':<9} {'principal':<20} {'host':<15} {'operation':<17} perm")
    for b in bindings:
        resource = f"{b.resource_type.name}:{b.resource_name}"
        print(
            f"{resource:<34} {b.pattern_type.name:<9} {b.principal:<20} {b.host:<15} "
            f"{b.operation.name:<17} {b.permission.name}"
        )
    return 0
