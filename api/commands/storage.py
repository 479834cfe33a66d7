"""``tidelake storage inspect``: the objects on object storage, read from the
objects themselves, verified against the metadata store."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "storage",
        help="inspect the stream storage (objects and WAL)",
        description="Inspect the S3Stream storage: `inspect` lists the objects on the object "
        "store with their streams and offset ranges and checks them against the metadata store.",
    )
    ssub = p.add_subparsers(dest="storage_command", metavar="COMMAND")
    ssub.required = True
    i = ssub.add_parser(
        "inspect",
        help="list objects with their streams and offset ranges; verify against the metadata store",
        description="Reads each object's index from the object store (the same settings as "
        "`tidelake serve`) and checks it against the metadata store. Exits 1 on problems "
        "(missing, corrupt or mismatched objects, offsets in no object); orphans are listed only.",
    )
    add_settings_arguments(i)
    i.add_argument("--json", action="store_true", help="print JSON instead of a table")
    i.set_defaults(func=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    from ingest.metadata import open_metadata_store
    from ingest.s3stream.inspect import inspect_storage
    from ingest.s3stream.objectstore import open_object_store

    settings = settings_from_args(args)
    cfg = settings.storage

    async def run() -> Any:
        metadata = open_metadata_store(settings.metadata_url)
        store = open_object_store(settings.object_store_url, **settings.object_store_options())
        try:
            wal = cfg.wal_object_prefix if cfg.wal_kind == "object" else None
            return await inspect_storage(store, metadata, cfg.object_prefix, wal)
        finally:
            await store.close()
            metadata.close()

    from api.commands.sql import progress

    with progress("reading the objects in the object store"):
        report = asyncio.run(run())
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "problems": report.problems,
                    "objects": [
                        {
                            "key": o.key,
                            "size": o.size,
                            "kind": o.kind,
                            "status": o.status,
                            "ranges": [
                                {
                                    "stream": e.stream_id,
                                    "start": e.start_offset,
                                    "end": e.end_offset,
                                }
                                for e in o.ranges
                            ],
                        }
                        for o in report.objects
                    ],
                    "wal_objects": [{"key": k, "size": s} for k, s in report.wal_objects],
                },
                indent=2,
            )
        )
    else:
        print(f"{'object':<40} {'kind':<10} {'bytes':>12} {'status':<8} streams [start, end)")
        for o in report.objects:
            ranges = " ".join(f"{e.stream_id}:[{e.start_offset},{e.end_offset})" for e in o.ranges)
            print(f"{o.key:<40} {o.kind:<10} {o.size:>12} {o.status:<8} {ranges}")
        total = sum(o.size for o in report.objects)
        print(f"{len(report.objects)} objects, {total} bytes")
        if report.wal_objects:
            wal_bytes = sum(s for _, s in report.wal_objects)
            print(f"{len(report.wal_objects)} WAL objects, {wal_bytes} bytes (not yet uploaded)")
        for p in report.problems:
            print(f"PROBLEM: {p}")
        print("OK" if report.ok else f"{len(report.problems)} problems")
    return 0 if report.ok else 1
