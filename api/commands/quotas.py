"""``tidelake quotas set|remove|list``: client quotas in the metadata store.

Like Kafka's ``kafka-configs --entity-type users/clients --alter --add-config
producer_byte_rate=...``, written to the metadata store directly: running
brokers apply a change within ``acl_refresh_interval_ms``. Over the Kafka
protocol, AlterClientQuotas / DescribeClientQuotas do the same.

    tidelake quotas set --user alice --producer-byte-rate 1048576
    tidelake quotas set --default-user --client-id etl --consumer-byte-rate 5000000
    tidelake quotas list [--json]
    tidelake quotas remove --user alice [--key producer_byte_rate]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = ["register"]


def _entity_arguments(p: argparse.ArgumentParser) -> None:
    u = p.add_mutually_exclusive_group()
    u.add_argument("--user", help="a user (the principal's name: alice for User:alice)")
    u.add_argument("--default-user", action="store_true", help="the default user")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--client-id", help="a client id")
    c.add_argument("--default-client-id", action="store_true", help="the default client id")


def register(sub: Any) -> None:
    p = sub.add_parser("quotas", help="manage client byte-rate quotas (per user and client id)")
    qsub = p.add_subparsers(dest="quotas_command", metavar="COMMAND")
    qsub.required = True
    s = qsub.add_parser("set", help="set quotas of a user, a client id or both")
    add_settings_arguments(s)
    _entity_arguments(s)
    s.add_argument("--producer-byte-rate", type=float, metavar="BYTES_PER_S")
    s.add_argument("--consumer-byte-rate", type=float, metavar="BYTES_PER_S")
    s.set_defaults(func=_set)
    r = qsub.add_parser("remove", help="remove quotas of an entity (every key unless --key)")
    add_settings_arguments(r)
    _entity_arguments(r)
    r.add_argument("--key", action="append", choices=("producer_byte_rate", "consumer_byte_rate"))
    r.set_defaults(func=_remove)
    ls = qsub.add_parser("list", help="list every entity's quotas")
    add_settings_arguments(ls)
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=_list)


def _entity(args: argparse.Namespace) -> Any:
    from ingest.security.quota import QuotaEntity

    parts: list[tuple[str, str | None]] = []
    if args.user is not None or args.default_user:
        parts.append(("user", args.user))
    if args.client_id is not None or args.default_client_id:
        parts.append(("client-id", args.client_id))
    return QuotaEntity.of(parts)


def _store(args: argparse.Namespace) -> tuple[Any, Any]:
    from ingest.metadata import open_metadata_store
    from ingest.security.quota import MetadataQuotaStore

    store = open_metadata_store(settings_from_args(args).metadata_url)
    return store, MetadataQuotaStore(store)


def _describe(entity: Any) -> str:
    return ", ".join(f"{k}={'<default>' if n is None else n}" for k, n in entity.parts())


def _set(args: argparse.Namespace) -> int:
    from ingest.security.quota import InvalidQuota, check_values

    values = {
        k: v
        for k, v in (
            ("producer_byte_rate", args.producer_byte_rate),
            ("consumer_byte_rate", args.consumer_byte_rate),
        )
        if v is not None
    }
    try:
        entity = _entity(args)
        if not values:
            raise InvalidQuota("give --producer-byte-rate and/or --consumer-byte-rate")
        check_values(values)
    except InvalidQuota as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 2
    store, quotas = _store(args)
    try:
        quotas.alter(entity, values, [])
    finally:
        store.close()
    print(f"{_describe(entity)}: " + ", ".join(f"{k}={v:.0f}" for k, v in values.items()))
    return 0


def _remove(args: argparse.Namespace) -> int:
    from ingest.security.quota import QUOTA_KEYS, InvalidQuota

    try:
        entity = _entity(args)
    except InvalidQuota as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 2
    store, quotas = _store(args)
    try:
        if entity not in quotas.entries():
            print(f"tidelake: no quota for {_describe(entity)}", file=sys.stderr)
            return 1
        quotas.alter(entity, {}, args.key or list(QUOTA_KEYS))
    finally:
        store.close()
    print(f"removed {', '.join(args.key or QUOTA_KEYS)} of {_describe(entity)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    store, quotas = _store(args)
    try:
        entries = sorted(quotas.entries().items(), key=lambda e: e[0].key())
    finally:
        store.close()
    if args.json:
        rows = [{"entity": dict(e.parts()), "quotas": v} for e, v in entries]
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'entity':<44} quotas")
    for entity, values in entries:
        shown = ", ".join(f"{k}={v:.0f}" for k, v in sorted(values.items()))
        print(f"{_describe(entity):<44} {shown}")
    return 0
