"""``tidelake tables list|describe|snapshots|preview``: browse the platform catalog."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.commands.http_client import HttpLogin

__all__ = ["register"]


def register(subparsers: Any) -> None:
    from api.commands.serve import add_settings_arguments

    parser = subparsers.add_parser(
        "tables",
        help="browse Iceberg tables in the catalog (and table topics' Delta tables)",
        description="Browse the platform's Iceberg tables: list them, describe one (schema, "
        "partition spec, sort order, properties), its snapshots, a preview of its rows, and "
        "the table topics' status. The catalog is found as `tidelake serve` finds it "
        "(--config, --data-dir, TIDELAKE_*), or an Iceberg REST catalog with --rest-url.",
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    sub = parser.add_subparsers(dest="tables_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        add_settings_arguments(p)
        p.add_argument(
            "--rest-url",
            help="use an Iceberg REST catalog, e.g. http://127.0.0.1:8181 "
            "(default: the platform's own catalog)",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")

    p_list = sub.add_parser("list", help="list tables, of one namespace or of all")
    p_list.add_argument("namespace", nargs="?", help="dotted namespace; omit for all tables")
    common(p_list)
    p_list.set_defaults(func=_list)

    p_desc = sub.add_parser("describe", help="schema, partition spec, sort order, properties")
    p_desc.add_argument("table", help="namespace.table")
    p_desc.add_argument(
        "--format",
        choices=["iceberg", "delta"],
        help="which copy of a table.topic.format=both topic (default: Iceberg, else Delta)",
    )
    common(p_desc)
    p_desc.set_defaults(func=_describe)

    p_snap = sub.add_parser("snapshots", help="snapshots with summaries")
    p_snap.add_argument("table", help="namespace.table")
    common(p_snap)
    p_snap.set_defaults(func=_snapshots)

    p_prev = sub.add_parser(
        "preview",
        help="some rows of a table, ordered by Kafka partition and offset for a table topic",
        description="Up to --limit rows of the table's current snapshot, as its data files "
        "list them: Iceberg keeps no row order, so these are not necessarily the lowest "
        "offsets. A table topic's rows are shown by _kafka_partition and _kafka_offset, "
        "and its _kafka_key as text when it is UTF-8 text (base64 otherwise, and in --json).",
    )
    p_prev.add_argument("table", help="namespace.table")
    p_prev.add_argument("--limit", type=int, default=20, help="rows to show (default 20)")
    common(p_prev)
    p_prev.set_defaults(func=_preview)

    p_status = sub.add_parser(
        "status",
        help="table topics: lag, freshness, rows/s, files per commit, dead letters, last error; "
        "and the object storage's health",
        description='The table topics\' status from the HTTP API (with [http] auth = "basic": '
        "--http-user, or TIDELAKE_HTTP_USER and TIDELAKE_HTTP_PASSWORD; https:// with a "
        "private CA: --ca-file) and their dead letters from the broker (a secured listener: "
        "--command-config, whose basic.auth.user.info also logs in to the HTTP API).",
    )
    add_settings_arguments(p_status)
    p_status.add_argument(
        "--http-url",
        help="Tidelake's HTTP API (default: http://<http_listen of the settings>, "
        "http://127.0.0.1:8181)",
    )
    p_status.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        help="the broker holding the dead-letter topics, counted across restarts (default: "
        "kafka_listen of the settings, unless --http-url is given)",
    )
    p_status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    from api.commands.http_client import add_http_login
    from api.commands.topics import add_command_config

    add_http_login(p_status)
    add_command_config(p_status)
    p_status.set_defaults(func=_status)


def _catalog(args: argparse.Namespace) -> Any:
    from api.commands.serve import settings_from_args
    from catalog.factory import load_platform_catalog

    settings = settings_from_args(args).catalog
    if args.rest_url:
        settings = type(settings).model_validate(
            {**settings.model_dump(), "type": "rest", "uri": args.rest_url}
        )
    return load_platform_catalog(settings)


def _status(args: argparse.Namespace) -> int:
    import httpx

    from api.commands.http_client import (
        describe_error,
        http_login,
        kafka_settings,
        login_refused,
        read_command_config,
    )
    from api.commands.serve import connect_address, settings_from_args

    settings = settings_from_args(args)
    url = args.http_url or f"http://{connect_address(settings.process.http_listen)}"
    props = read_command_config(args)
    login = http_login(args, props)
    try:
        response = httpx.get(
            f"{url.rstrip('/')}/api/v1/table-topics", timeout=10, **login.request_options()
        )
        refused = login_refused(response, login, "the HTTP API")
        if refused is not None:
            print(f"tidelake: {refused}", file=sys.stderr)
            return 1
        rows = response.raise_for_status().json()
    except httpx.HTTPError as exc:
        print(
            f"error: cannot read table topic status from {url}: {describe_error(exc)}",
            file=sys.stderr,
        )
        return 1
    # the service counts what it dead-lettered since it started; the topics keep
    # every dead letter across restarts
    # (with --http-url alone, the broker of these settings may be another platform's)
    bootstrap = args.bootstrap_server or (
        None if args.http_url else connect_address(settings.process.kafka_listen)
    )
    kept = _dead_letters_in_topics(bootstrap, rows, kafka_settings(props)) if bootstrap else {}
    for r in rows:
        if r.get("topic") in kept:
            r["dead_letters"] = max(int(r.get("dead_letters") or 0), kept[r["topic"]])
        if isinstance(r.get("files_per_commit"), float):
            r["files_per_commit"] = round(r["files_per_commit"], 1)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(_storage_line(url, login))
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


def _dead_letters_in_topics(
    bootstrap: str, rows: list[dict[str, Any]], client: dict[str, str] | None = None
) -> dict[str, int]:
    """Per table topic, the records its dead-letter topic holds (``table.topic.errors.dlq.topic``,
    default ``<topic>.dlq``), asked with the librdkafka settings ``client`` (those of
    ``--command-config``: TLS, SASL). Empty when the broker cannot be asked: the caller
    keeps the service's own count."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    topics = [str(r["topic"]) for r in rows if r.get("topic")]
    if not topics:
        return {}
    conf: dict[str, Any] = {**(client or {}), "bootstrap.servers": bootstrap, "log_level": 0}
    out: dict[str, int] = {}
    try:
        admin = AdminClient({**conf, "socket.timeout.ms": 5000})
        existing = admin.list_topics(timeout=5).topics
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics if t in existing]
        dlqs: dict[str, str] = {}
        for res, future in admin.describe_configs(resources).items():
            configs = future.result(5)
            entry = configs.get("table.topic.errors.dlq.topic")
            dlqs[res.name] = (entry.value if entry is not None else "") or f"{res.name}.dlq"
        consumer = Consumer(
            {**conf, "group.id": "tidelake-cli-status", "enable.auto.commit": False}
        )
        try:
            for topic, dlq in dlqs.items():
                if dlq not in existing:
                    out[topic] = 0
                    continue
                total = 0
                for partition in existing[dlq].partitions:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(dlq, partition), timeout=5
                    )
                    total += max(0, high - low)
                out[topic] = total
        finally:
            consumer.close()
    except Exception:  # noqa: BLE001 - the broker's view is a bonus; the service's count stays
        return {}
    return out


def _storage_line(url: str, login: HttpLogin | None = None) -> str:
    """One line on the object storage's health, from ``/api/v1/storage``."""
    import httpx

    options = login.request_options() if login is not None else {}
    try:
        h = (
            httpx.get(f"{url.rstrip('/')}/api/v1/storage", timeout=10, **options)
            .raise_for_status()
            .json()
        )
    except httpx.HTTPError as exc:
        return f"object storage: unknown ({exc})"
    line = f"object storage: {h.get('state', 'unknown')}"
    if "error_rate" in h:
        line += (
            f", error rate {h['error_rate'] * 100:.1f}% over {h.get('window_s', 0):.0f} s"
            f", slowest {h.get('slowest_ms', 0):.0f} ms"
        )
    if h.get("pending_upload_bytes") is not None:
        line += f", {h['pending_upload_bytes']} bytes pending upload"
    if h.get("produce_throttle_ms"):
        line += f", produce throttled {h['produce_throttle_ms']} ms"
    if h.get("last_error"):
        line += f"; last error ({h.get('last_error_at')}): {h['last_error']}"
    return line + "\n"


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
        deltas = [
            (name.rsplit(".", 1)[0], name.rsplit(".", 1)[1])
            for name, _uri in _delta_tables(args, catalog)
            if "." in name and (not args.namespace or name.rsplit(".", 1)[0] == args.namespace)
        ]
        if args.json:
            rows = [{**t.model_dump(mode="json"), "format": "iceberg"} for t in tables]
            rows += [
                {
                    "namespace": ns.split("."),
                    "name": n,
                    "identifier": f"{ns}.{n}",
                    "format": "delta",
                }
                for ns, n in deltas
            ]
            print(json.dumps(rows, indent=2))
            return
        listed = [(".".join(t.namespace), t.name, "iceberg") for t in tables]
        listed += [(ns, n, "delta") for ns, n in deltas]
        _print_table(["namespace", "table", "format"], sorted(listed))

    return _run(args, action)


def _delta_location(args: argparse.Namespace, catalog: Any) -> Any:
    from api.commands.serve import settings_from_args
    from table_topic.delta.location import DeltaLocation

    tt = settings_from_args(args).table_topic
    props = {k: str(v) for k, v in getattr(catalog, "properties", {}).items()}
    return DeltaLocation.resolve(tt.delta_location, tt.delta_storage_options, props)


def _delta_tables(args: argparse.Namespace, catalog: Any) -> list[tuple[str, str]]:
    """(namespace.table, uri) of the table topics' Delta tables (table.topic.format)."""
    from table_topic.delta.maintenance import list_delta_tables

    location = _delta_location(args, catalog)
    return list_delta_tables(location) if location is not None else []


def _describe_delta(args: argparse.Namespace, catalog: Any) -> bool:
    from table_topic.delta.maintenance import describe_delta_table

    uri = dict(_delta_tables(args, catalog)).get(args.table)
    if uri is None:
        return False
    info = describe_delta_table(_delta_location(args, catalog), args.table, uri)
    if args.json:
        print(json.dumps(info.as_dict(), indent=2))
        return True
    print(f"Table      {info.table}")
    print("Format     Delta Lake")
    print(f"Location   {info.uri}")
    print(f"Version    {info.version} ({info.files} data files, {info.rows} rows)")
    print(f"Offsets    {json.dumps(info.offsets) if info.offsets else '-'}")
    print("\nSchema")
    _print_table(["name", "type"], [(f["name"], f["type"]) for f in info.schema])
    print("\nPartition columns")
    print(", ".join(info.partition_columns) or "unpartitioned")
    return True


def _describe(args: argparse.Namespace) -> int:
    from catalog import browse

    def action(catalog: Any) -> None:
        if args.format == "delta" or (
            args.format is None
            and not catalog.table_exists(browse.parse_identifier(args.table))
            and _describe_delta(args, catalog)
        ):
            if args.format == "delta" and not _describe_delta(args, catalog):
                raise ValueError(f"no Delta table {args.table}")
            return
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
        rows = _kafka_order(prev.rows)
        binary = {c for c, t in zip(prev.columns, prev.types, strict=True) if "binary" in t}
        _print_table(
            prev.columns,
            [[_shown(c in binary, c, row.get(c)) for c in prev.columns] for row in rows],
        )
        order = " by partition and offset" if rows is not prev.rows else ""
        print(
            f"({len(rows)} rows of snapshot {prev.snapshot_id}{order}; "
            "the data files' first rows, not necessarily the lowest offsets)"
        )

    return _run(args, action)


def _kafka_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A table topic's rows by (``_kafka_partition``, ``_kafka_offset``); other rows as read."""
    if not rows or "_kafka_partition" not in rows[0] or "_kafka_offset" not in rows[0]:
        return rows
    return sorted(rows, key=lambda r: (r["_kafka_partition"] or 0, r["_kafka_offset"] or 0))


def _shown(binary: bool, column: str, value: Any) -> Any:
    """``_kafka_key`` (binary, base64 in the preview) as text when it is UTF-8 text."""
    if not binary or column != "_kafka_key" or not isinstance(value, str):
        return value
    import base64
    import binascii

    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return value
    return text if text.isprintable() else value
