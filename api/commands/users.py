"""``tidelake users create|delete|list``: SASL/SCRAM users in the metadata store.

Like Kafka's ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'``
the credentials are written to the metadata store directly (the brokers read
them there on every login, so a change applies to the next connection). Only
salted, iterated keys are stored, never the password.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = ["register"]

_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "users", help="manage SASL/SCRAM users (stored salted in the metadata store)"
    )
    usub = p.add_subparsers(dest="users_command", metavar="COMMAND")
    usub.required = True
    c = usub.add_parser(
        "create",
        help="create a user or change its password",
        description="Stores SCRAM credentials for NAME (both mechanisms unless --mechanism is "
        "given). The password comes from --password, else --password-stdin, else a prompt.",
    )
    add_settings_arguments(c)
    c.add_argument("name")
    c.add_argument("--password", help="the password (visible to other local users; prefer stdin)")
    c.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    c.add_argument("--mechanism", action="append", choices=_MECHANISMS, help="(repeatable)")
    c.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (4096-16384)")
    c.set_defaults(func=_create)
    d = usub.add_parser("delete", help="delete a user's credentials")
    add_settings_arguments(d)
    d.add_argument("name")
    d.add_argument("--mechanism", choices=_MECHANISMS, help="only this mechanism's credential")
    d.set_defaults(func=_delete)
    ls = usub.add_parser("list", help="list users and their mechanisms")
    add_settings_arguments(ls)
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=_list)


def _credentials(args: argparse.Namespace) -> Any:
    from ingest.metadata import open_metadata_store
    from ingest.security import MetadataCredentialStore

    settings = settings_from_args(args)
    store = open_metadata_store(settings.metadata_url)
    return store, MetadataCredentialStore(store)


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise SystemExit("tidelake: passwords differ")
    return first


def _create(args: argparse.Namespace) -> int:
    from ingest.security import make_credential

    password = _password(args)
    if not password:
        print("tidelake: the password must not be empty", file=sys.stderr)
        return 2
    try:
        creds = [
            make_credential(password, m, args.iterations) for m in args.mechanism or _MECHANISMS
        ]
    except ValueError as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 2
    store, credentials = _credentials(args)
    try:
        for cred in creds:
            credentials.put(args.name, cred)
    finally:
        store.close()
    print(f"user {args.name}: {', '.join(c.mechanism for c in creds)}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    store, credentials = _credentials(args)
    try:
        removed = credentials.delete(args.name, args.mechanism)
    finally:
        store.close()
    if not removed:
        print(f"tidelake: no such user {args.name}", file=sys.stderr)
        return 1
    print(f"deleted {args.name}" + (f" ({args.mechanism})" if args.mechanism else ""))
    return 0


def _list(args: argparse.Namespace) -> int:
    store, credentials = _credentials(args)
    try:
        infos = credentials.list()
    finally:
        store.close()
    if args.json:
        print(
            json.dumps(
                [
                    {"user": i.user, "mechanism": i.mechanism, "iterations": i.iterations}
                    for i in infos
                ],
                indent=2,
            )
        )
        return 0
    print(f"{'user':<24} {'mechanism':<16} iterations")
    for i in infos:
        print(f"{i.user:<24} {i.mechanism:<16} {i.iterations}")
    return 0
