"""``tidelake schemas``: list, show and register schemas in the schema registry (its REST API)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

_CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def _call(args: argparse.Namespace, method: str, path: str, **kwargs: Any) -> Any:
    import httpx

    try:
        response = httpx.request(
            method, args.url.rstrip("/") + path, timeout=args.timeout, **kwargs
        )
    except httpx.HTTPError as exc:
        raise SystemExit(
            f"tidelake: cannot reach the schema registry at {args.url}: {exc}"
        ) from None
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


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schemas", help="list, show and register schemas in the schema registry"
    )
    parser.add_argument("--url", default="http://127.0.0.1:8081", help="schema registry URL")
    parser.add_argument("--timeout", type=float, default=10.0)
    sub = parser.add_subparsers(dest="schemas_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser("list", help="list subjects")
    p.add_argument("--prefix", default="", help="only subjects starting with this")
    p.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    p.set_defaults(func=_list)

    p = sub.add_parser("get", help="show a subject version or a schema by id")
    p.add_argument("subject", nargs="?")
    p.add_argument("--version", default="latest")
    p.add_argument("--id", type=int, help="global schema id instead of a subject")
    p.add_argument("--schema-only", action="store_true", help="print only the schema text")
    p.set_defaults(func=_get)

    p = sub.add_parser("register", help="register a schema file under a subject")
    p.add_argument("subject")
    p.add_argument("file", help="schema file (.avsc, .json, .proto) or - for stdin")
    p.add_argument(
        "--type", choices=["AVRO", "JSON", "PROTOBUF"], help="default: from the file suffix"
    )
    p.add_argument("--ref", action="append", help="reference NAME=SUBJECT:VERSION (repeatable)")
    p.add_argument("--normalize", action="store_true")
    p.set_defaults(func=_register)
