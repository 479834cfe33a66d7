"""``tidelake tables list|describe|snapshots|preview``: browse the platform catalog."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("tables", help="browse Iceberg tables in the catalog")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    sub = parser.add_subparsers(dest="tables_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config", "-c", metavar="FILE", help="TOML config file, as for tidelake serve"
        )
        p.add_argument("--data-dir", type=Path, help="state directory of the embedded catalog")
        p.add_argument("--rest-url", help="use an Iceberg REST catalog, e.g. http://127.0.0.1:8181")
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")

    p_list = sub.add_parser("list", help="list tables, of one namespace or of all")
    p_list.add_argument("namespace", nargs="?", help="dotted namespace; omit for all tables")
    common(p_list)
    p_list.set_defaults(func=_list)

    p_desc = sub.add_parser("describe", help="schema, partition spec, sort order, properties")
    p_desc.add_argument("table", help="namespace.table")
    common(p_desc)
    p_desc.set_defaults(func=_describe)

    p_snap = sub.add_parser("snapshots", help="snapshots with summaries")
    p_snap.add_argument("table", help="namespace.table")
    common(p_snap)
    p_snap.set_defaults(func=_snapshots)

    p_prev = sub.add_parser("preview", help="the first rows of a table")
    p_prev.add_argument("table", help="namespace.table")
    p_prev.add_argument("--limit", type=int, default=20)
    common(p_prev)
    p_prev.set_defaults(func=_preview)

    p_status = sub.add_parser(
        "status",
        help="table topics: lag, freshness, rows/s, files per commit, dead letters, last error",
    )
    p_status.add_argument(
        "--config", "-c", metavar="FILE", help="TOML config file, as for tidelake serve"
    )
    p_status.add_argument(
        "--http-url", help="Tidelake's HTTP API (default: http_listen of the settings)"
    )
    p_status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p_status.set_defaults(func=_status)


def _catalog(args: argparse.Namespace) -> Any:
    from api.settings import load_settings
    from catalog.factory import load_platform_catalog

    settings = load_settings(getattr(args, "config", None), data_dir=args.data_dir).catalog
    if args.rest_url:
        settings = type(settings).model_validate(
            {**settings.model_dump(), "type": "rest", "uri": args.rest_url}
        )
    return load_platform_catalog(settings)


def _status(args: argparse.Namespace) -> int:
    import httpx

    from api.settings import load_settings

    url = args.http_url or f"http://{load_settings(args.config).process.http_listen}"
    try:
        rows = (
            httpx.get(f"{url.rstrip('/')}/api/v1/table-topics", timeout=10)
            .raise_for_status()
            .json()
        )
    except httpx.HTTPError as exc:
        print(f"error: cannot read table topic status from {url}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    _print_table(
        [
            "topic",
            "table",
            "state",
            "lag",
            "freshness ms",
            "rows/s",
            "files/commit",
            "dead letters",
            "last error",
        ],
        [
            (
                r.get("topic"),
                r.get("table"),
                r.get("state"),
                r.get("lag"),
                r.get("freshness_ms"),
                r.get("rows_per_second"),
                r.get("files_per_commit"),
                r.get("dead_letters"),
                r.get("last_error"),
            )
            for r in rows
        ],
    )
    return 0


def _run(args: argparse.Namespace, action: Any) -> int:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        action(_catalog(args))
    except (NoSuchNamespaceError, NoSuchTableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _dump(value: Any) -> None:
    if isinstance(value, list):
        print(json.dumps([v.model_dump(mode="json") for v in value], indent=2))
    else:
        print(json.dumps(value.model_dump(mode="json"), indent=2))


def _list(args: argparse.Namespace) -> int:
    from catalog import browse

    def action(catalog: Any) -> None:
        if args.namespace:
            namespaces = [tuple(args.namespace.split("."))]
        else:
            namespaces = [tuple(n.namespace) for n in browse.list_namespaces(catalog)]
        tables = [t for ns in namespaces for t in browse.list_tables(catalog, ns)]
        if args.json:
            _dump(tables)
            return
        _print_table(["namespace", "table"], [(".".join(t.namespace), t.name) for t in tables])

    return _run(args, action)


def _describe(args: argparse.Namespace) -> int:
    from catalog import browse

    def action(catalog: Any) -> None:
        desc = browse.describe_table(catalog, browse.parse_identifier(args.table))
        if args.json:
            _dump(desc)
            return
        print(f"Table      {desc.identifier}")
        print(f"UUID       {desc.table_uuid}")
        print(f"Format     v{desc.format_version}")
        print(f"Location   {desc.location}")
        print(f"Metadata   {desc.metadata_location}")
        print(f"Snapshot   {desc.current_snapshot_id} ({desc.snapshot_count} snapshots)")
        print(f"\nSchema (id {desc.schema_id})")
        rows: list[tuple[Any, ...]] = []

        def walk(fields: list[browse.FieldInfo], depth: int) -> None:
            for f in fields:
                req = "required" if f.required else "optional"
                rows.append((f.id, "  " * depth + f.name, f.type, req, f.doc or ""))
                walk(f.fields, depth + 1)

        walk(desc.fields, 0)
        _print_table(["id", "name", "type", "", "doc"], rows)
        print(f"\nPartition spec (id {desc.partition_spec_id})")
        if desc.partition_fields:
            _print_table(
                ["field id", "name", "source", "transform"],
                [(p.field_id, p.name, p.source_name, p.transform) for p in desc.partition_fields],
            )
        else:
            print("unpartitioned")
        print(f"\nSort order (id {desc.sort_order_id})")
        if desc.sort_fields:
            _print_table(
                ["source", "transform", "direction", "nulls"],
                [(s.source_name, s.transform, s.direction, s.null_order) for s in desc.sort_fields],
            )
        else:
            print("unsorted")
        print("\nProperties")
        _print_table(["key", "value"], sorted(desc.properties.items()))

    return _run(args, action)


def _snapshots(args: argparse.Namespace) -> int:
    from catalog import browse

    def action(catalog: Any) -> None:
        snaps = browse.snapshots(catalog, browse.parse_identifier(args.table))
        if args.json:
            _dump(snaps)
            return
        _print_table(
            [
                "snapshot id",
                "parent",
                "time (UTC)",
                "operation",
                "added records",
                "total records",
                "",
            ],
            [
                (
                    s.snapshot_id,
                    s.parent_snapshot_id,
                    s.timestamp[:19],
                    s.operation,
                    s.summary.get("added-records", ""),
                    s.summary.get("total-records", ""),
                    "current" if s.current else "",
                )
                for s in snaps
            ],
        )

    return _run(args, action)


def _preview(args: argparse.Namespace) -> int:
    from catalog import browse

    def action(catalog: Any) -> None:
        prev = browse.preview_rows(catalog, browse.parse_identifier(args.table), args.limit)
        if args.json:
            _dump(prev)
            return
        _print_table(prev.columns, [[row.get(c) for c in prev.columns] for row in prev.rows])
        print(f"({len(prev.rows)} rows)")

    return _run(args, action)
