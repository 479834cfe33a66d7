"""``tidelake schemas``: list, show and register schemas in the schema registry (its REST API)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

_CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def _url(args: argparse.Namespace) -> str:
    """``--url``, else where the platform's settings (``--config``, ``--data-dir``,
    ``TIDELAKE_REGISTRY_LISTEN``, ...) say the registry listens."""
    from api.commands.serve import connect_address, settings_from_args

    if not args.url:
        args.url = f"http://{connect_address(settings_from_args(args).process.registry_listen)}"
    return str(args.url)


def _call(args: argparse.Namespace, method: str, path: str, **kwargs: Any) -> Any:
    """One request to the registry, logged in as ``--http-user`` / ``--command-config`` say."""
    import httpx

    from api.commands.http_client import describe_error, login_from_args, login_refused

    url = _url(args)
    login = login_from_args(args)
    try:
        response = httpx.request(
            method,
            url.rstrip("/") + path,
            timeout=args.timeout,
            **login.request_options(),
            **kwargs,
        )
    except httpx.HTTPError as exc:
        raise SystemExit(
            f"tidelake: cannot reach the schema registry at {url}: {describe_error(exc)}"
        ) from None
    refused = login_refused(response, login, "the schema registry")
    if refused is not None:
        raise SystemExit(f"tidelake: {refused}")
    body = response.json() if response.content else None
    if response.status_code >= 400:
        message = body.get("message") if isinstance(body, dict) else response.text
        code = body.get("error_code") if isinstance(body, dict) else response.status_code
        print(f"tidelake: {message} (error {code})", file=sys.stderr)
        raise SystemExit(1)
    return body


def _list(args: argparse.Namespace) -> int:
    params = {"subjectPrefix": args.prefix, "deleted": str(args.deleted).lower()}
    for subject in _call(args, "GET", "/subjects", params=params):
        print(subject)
    return 0


def _get(args: argparse.Namespace) -> int:
    if args.id is not None:
        body = _call(args, "GET", f"/schemas/ids/{args.id}")
    elif args.subject:
        from urllib.parse import quote

        body = _call(
            args, "GET", f"/subjects/{quote(args.subject, safe='')}/versions/{args.version}"
        )
    else:
        raise SystemExit("tidelake: give a SUBJECT or --id")
    if args.schema_only:
        schema = body["schema"]
        try:
            print(json.dumps(json.loads(schema), indent=2))
        except ValueError:
            print(schema)
    else:
        print(json.dumps(body, indent=2))
    return 0


def _parse_ref(text: str) -> dict[str, Any]:
    name, sep, rest = text.partition("=")
    subject, _, version = rest.rpartition(":")
    if not sep or not name or not subject or not version.lstrip("-").isdigit():
        raise SystemExit(f"tidelake: --ref expects NAME=SUBJECT:VERSION, got {text!r}")
    return {"name": name, "subject": subject, "version": int(version)}


def _register(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    schema_type = args.type or {".proto": "PROTOBUF", ".json": "JSON"}.get(
        Path(args.file).suffix, "AVRO"
    )
    if args.file.endswith(".avsc"):
        schema_type = args.type or "AVRO"
    body: dict[str, Any] = {"schema": text, "schemaType": schema_type}
    if args.ref:
        body["references"] = [_parse_ref(r) for r in args.ref]
    path = f"/subjects/{quote(args.subject, safe='')}/versions"
    result = _call(
        args,
        "POST",
        path,
        json=body,
        headers=_CT,
        params={"normalize": str(args.normalize).lower()},
    )
    print(json.dumps(result))
    return 0


def _add_connection(parser: argparse.ArgumentParser, *, again: bool = False) -> None:
    """--url, the login options and --command-config (before or after the action)."""
    from api.commands.http_client import add_http_login
    from api.commands.serve import add_settings_arguments

    again_help = "the same as before the action"
    extra: dict[str, Any] = {"default": argparse.SUPPRESS} if again else {}
    if again:
        parser.add_argument("--url", help=again_help, **extra)
    add_http_login(parser, again=again)
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help=again_help
        if again
        else "a properties file of Confluent's schema registry client settings: "
        "basic.auth.user.info=USER:PASSWORD (basic.auth.credentials.source=USER_INFO), "
        "schema.registry.ssl.ca.location=PEM",
        **extra,
    )
    add_settings_arguments(parser, again=again)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schemas",
        help="list, show and register schemas in the schema registry",
        description="Talk to Tidelake's schema registry (the Confluent REST API): list "
        "subjects, show a version or a schema by id, register a schema file. The registry "
        "is found as `tidelake serve` finds its address: --url, else registry_listen of "
        "--config / --data-dir / TIDELAKE_REGISTRY_LISTEN (default 127.0.0.1:8081). A "
        "registry with basic auth takes --http-user (or TIDELAKE_HTTP_USER and "
        "TIDELAKE_HTTP_PASSWORD); an https:// one with a private CA --ca-file PEM; a "
        "--command-config file may hold Confluent's basic.auth.user.info=USER:PASSWORD "
        "and schema.registry.ssl.ca.location=PEM.",
    )
    parser.add_argument(
        "--url",
        help="schema registry URL (default: http://<registry_listen>, http://127.0.0.1:8081)",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for a reply (default 10)"
    )
    _add_connection(parser)
    sub = parser.add_subparsers(dest="schemas_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser("list", help="list subjects")
    p.add_argument("--prefix", default="", help="only subjects starting with this (default: all)")
    p.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    _add_connection(p, again=True)
    p.set_defaults(func=_list)

    p = sub.add_parser("get", help="show a subject version or a schema by id")
    p.add_argument("subject", nargs="?", help="the subject (or give --id)")
    p.add_argument(
        "--version", default="latest", help="version number or 'latest' (default latest)"
    )
    p.add_argument("--id", type=int, help="global schema id instead of a subject")
    p.add_argument("--schema-only", action="store_true", help="print only the schema text")
    _add_connection(p, again=True)
    p.set_defaults(func=_get)

    p = sub.add_parser("register", help="register a schema file under a subject")
    p.add_argument("subject", help="the subject, e.g. orders-value")
    p.add_argument("file", help="schema file (.avsc, .json, .proto) or - for stdin")
    p.add_argument(
        "--type",
        choices=["AVRO", "JSON", "PROTOBUF"],
        help="default: from the file suffix (.proto PROTOBUF, .json JSON, else AVRO)",
    )
    p.add_argument("--ref", action="append", help="reference NAME=SUBJECT:VERSION (repeatable)")
    p.add_argument(
        "--normalize",
        action="store_true",
        help="normalize the schema before looking it up or registering it",
    )
    _add_connection(p, again=True)
    p.set_defaults(func=_register)
