"""``tidelake maintenance status|run|sync|submit-command``: keep Iceberg and Delta tables fast.

Delta tables of table topics (``table.topic.format=delta|both``) are maintained
with delta-rs, without Spark, under the same ``[policy]``: ``optimize``,
``checkpoint`` and ``vacuum`` (see ``table_topic.delta.maintenance``).

Reads the same settings as ``tidelake serve`` (``--config``, ``--data-dir``,
``TIDELAKE_*``) to find the catalog and warehouse. Maintenance's own settings come
from ``TIDELAKE_MAINTENANCE_*`` / ``TIDELAKE_SPARK_*`` and, optionally, a TOML file
given with ``--maintenance-config``::

    [policy]                      # spark.policy.MaintenancePolicy
    target_file_size_bytes = 134217728
    sort_columns = { "shop.orders" = ["ts"] }
    [spark]                       # spark.config.SparkSettings
    master = "spark://head:7077"
    [sync]
    interval_seconds = 30         # for ``sync --scheduled``
    [[sync.targets]]              # catalog.config.CatalogSettings, plus "name";
                                  # only these keys (no TIDELAKE_CATALOG_* inherited)
    type = "glue"
    glue_region = "eu-west-1"
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

from api.commands.serve import settings_from_args
from api.commands.sql import add_spark_arguments, spark_settings_from_args

__all__ = ["register"]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "maintenance",
        help="compact, expire and clean Iceberg tables with Spark; mirror them into other catalogs",
        description="Keep the platform's Iceberg tables fast: `status` shows each table's files, "
        "deletes, manifests and snapshots and the jobs the policy plans; `run` runs them "
        "through Spark (once, on a schedule, or --force); `sync` mirrors the tables into Glue, "
        "a Hive Metastore or REST catalogs; `submit-command` prints a spark-submit command for "
        "a cluster. The catalog is found as `tidelake serve` finds it (--config, --data-dir, "
        "TIDELAKE_*); thresholds come from [policy] or TIDELAKE_MAINTENANCE_*.",
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    actions = parser.add_subparsers(dest="maintenance_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser, spark: bool) -> None:
        if spark:
            add_spark_arguments(p)
        else:
            from api.commands.serve import add_settings_arguments

            add_settings_arguments(p)
        p.add_argument(
            "--maintenance-config",
            metavar="FILE",
            help="TOML with [policy], [spark], [[sync.targets]]",
        )
        p.add_argument("--json", action="store_true", help="print JSON lines instead of tables")

    p_status = actions.add_parser(
        "status", help="per table: files, deletes, snapshots, planned jobs"
    )
    p_status.add_argument(
        "--table", action="append", help="ns.table (repeatable); default all; a missing one exits 1"
    )
    common(p_status, spark=False)
    p_status.set_defaults(func=_status)

    p_run = actions.add_parser("run", help="run the jobs the policy plans (or --force them)")
    p_run.add_argument("--table", action="append", help="ns.table (repeatable); default all")
    p_run.add_argument(
        "--job",
        action="append",
        help="only this job (repeatable): rewrite_data_files, rewrite_manifests, "
        "rewrite_position_delete_files, expire_snapshots, remove_orphan_files; for Delta "
        "tables optimize, checkpoint, vacuum",
    )
    p_run.add_argument("--force", action="store_true", help="run the jobs whatever the policy says")
    p_run.add_argument(
        "--every", type=float, metavar="SECONDS", help="keep running on this schedule"
    )
    p_run.add_argument(
        "--scheduled",
        action="store_true",
        help="keep running every policy interval_seconds (TIDELAKE_MAINTENANCE_INTERVAL_SECONDS)",
    )
    p_run.add_argument(
        "--max-runs", type=int, help="with --every: stop after this many runs (default: no limit)"
    )
    p_run.add_argument("--no-progress", action="store_true", help="no progress display")
    common(p_run, spark=True)
    p_run.set_defaults(func=_run)

    p_sync = actions.add_parser(
        "sync", help="mirror the platform's tables into Glue, Hive Metastore or REST catalogs"
    )
    p_sync.add_argument("--namespace", action="append", help="only these namespaces")
    p_sync.add_argument("--dry-run", action="store_true", help="report what would change")
    p_sync.add_argument("--every", type=float, metavar="SECONDS", help="keep syncing")
    p_sync.add_argument(
        "--scheduled", action="store_true", help="keep syncing every [sync] interval_seconds"
    )
    p_sync.add_argument(
        "--max-runs", type=int, help="with --every: stop after this many runs (default: no limit)"
    )
    common(p_sync, spark=False)
    p_sync.set_defaults(func=_sync)

    p_submit = actions.add_parser(
        "submit-command", help="print a spark-submit command that runs maintenance on a cluster"
    )
    common(p_submit, spark=True)
    p_submit.set_defaults(func=_submit_command)


def _fail(message: str) -> SystemExit:
    print(f"tidelake: {message}", file=sys.stderr)
    return SystemExit(2)


def _maintenance_file(args: argparse.Namespace) -> dict[str, Any]:
    # A separate file, or else the main config file (its [spark], [policy]
    # and [sync] sections), as tidelake serve reads it.
    path = getattr(args, "maintenance_config", None) or getattr(args, "config", None)
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise _fail(f"maintenance config {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(f"{path} is not valid TOML: {exc}") from None


def _env_over_file(cls: Any, section: dict[str, Any], key: str) -> Any:
    from api.settings import load_section
    from ingest.errors import ConfigError

    try:
        return load_section(cls, key, section)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _policy(args: argparse.Namespace) -> Any:
    from spark.policy import MaintenancePolicy

    return _env_over_file(MaintenancePolicy, _maintenance_file(args).get("policy", {}), "policy")


def _spark_settings(args: argparse.Namespace) -> Any:
    from spark.config import SparkSettings

    base = _env_over_file(SparkSettings, _maintenance_file(args).get("spark", {}), "spark")
    flags = spark_settings_from_args(args)
    update = {k: getattr(flags, k) for k in flags.model_fields_set}
    if "conf" in update:
        update["conf"] = {**base.conf, **update["conf"]}
    return base.model_copy(update=update)


def _platform_catalog(args: argparse.Namespace) -> tuple[Any, Any]:
    from catalog.factory import load_platform_catalog

    settings = settings_from_args(args)
    try:
        return settings, load_platform_catalog(settings.catalog)
    except Exception as exc:  # noqa: BLE001 - any catalog failure ends the command
        print(f"tidelake: cannot open the catalog: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _status(args: argparse.Namespace) -> int:
    from spark.maintenance import maintenance_status

    settings, catalog = _platform_catalog(args)
    policy = _policy(args)
    statuses = maintenance_status(catalog, policy, args.table)
    deltas = _delta_status(settings, catalog, policy, args.table)
    if args.json:
        for d in deltas:
            print(json.dumps(d.as_dict()))
        for s in statuses:
            print(
                json.dumps(
                    {
                        "table": s.table,
                        "stats": None if s.stats is None else s.stats.__dict__,
                        "planned": [p.__dict__ for p in s.planned],
                        "error": s.error,
                    }
                )
            )
        return 1 if any(s.error for s in statuses) else 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Table maintenance")
    for column in ("table", "data files", "small", "deletes", "manifests", "snapshots", "plan"):
        table.add_column(column)
    for s in statuses:
        if s.stats is None:
            table.add_row(s.table, "", "", "", "", "", f"[red]{s.error}")
            continue
        st = s.stats
        plan = "\n".join(f"{p.job}: {p.reason}" for p in s.planned) or "-"
        table.add_row(
            s.table,
            str(st.data_files),
            str(st.small_files),
            str(st.delete_files),
            str(st.manifests),
            str(st.snapshots),
            plan,
        )
    Console(width=160).print(table)
    if deltas:
        dtable = Table(title="Delta table maintenance")
        for column in ("table", "data files", "small", "version", "checkpoint", "plan"):
            dtable.add_column(column)
        for d in deltas:
            plan = "\n".join(f"{p['job']}: {p['reason']}" for p in d.planned) or "-"
            checkpoint = "-" if d.last_checkpoint is None else str(d.last_checkpoint)
            dtable.add_row(
                d.table, str(d.files), str(d.small_files), str(d.version), checkpoint, plan
            )
        Console(width=160).print(dtable)
    _explain_nothing_planned(statuses, policy)
    for s in statuses:
        if s.error:
            print(f"tidelake: {s.table}: {s.error}", file=sys.stderr)
    return 1 if any(s.error for s in statuses) else 0


def _run(args: argparse.Namespace) -> int:
    from spark.maintenance import run_maintenance
    from spark.schedule import run_every
    from spark.session import spark_catalog_name

    policy = _policy(args)
    spark_settings = _spark_settings(args)
    settings, catalog = _platform_catalog(args)
    every = args.every or (policy.interval_seconds if args.scheduled else None)
    delta_failures = 0 if every else _run_delta(args, settings, catalog, policy)
    if not every and not args.force and not _anything_planned(catalog, policy, args):
        from spark.maintenance import MaintenanceReport, maintenance_status

        _print_report(MaintenanceReport(), args.json)  # no need to start Spark
        if not args.json:
            _explain_nothing_planned(maintenance_status(catalog, policy, args.table), policy)
        return 1 if delta_failures else 0
    session = _open_session(args, settings, spark_settings)
    name = spark_catalog_name(settings.catalog, spark_settings)
    failures = 0

    def once() -> None:
        nonlocal failures
        if every:
            failures += _run_delta(args, settings, catalog, policy)
        with _Progress(session, enabled=not args.no_progress and not args.json) as progress:
            report = run_maintenance(
                session,
                catalog,
                policy,
                catalog_name=name,
                tables=args.table,
                jobs=args.job,
                force=args.force,
                on_job=progress.job_started,
            )
        _print_report(report, args.json)
        failures += len(report.errors)

    try:
        if every:
            run_every(every, once, max_runs=args.max_runs)
        else:
            once()
    except KeyboardInterrupt:
        pass
    finally:
        session.stop()
    return 1 if failures or delta_failures else 0


def _delta_location(settings: Any, catalog: Any) -> Any:
    from table_topic.delta.location import DeltaLocation

    props = {k: str(v) for k, v in getattr(catalog, "properties", {}).items()}
    tt = settings.table_topic
    return DeltaLocation.resolve(tt.delta_location, tt.delta_storage_options, props)


def _delta_status(settings: Any, catalog: Any, policy: Any, tables: Any) -> list[Any]:
    from table_topic.delta.maintenance import describe_delta_table, list_delta_tables

    location = _delta_location(settings, catalog)
    if location is None:
        return []
    return [
        describe_delta_table(location, name, uri, policy)
        for name, uri in list_delta_tables(location)
        if (not tables or name in tables) and policy.selects(name)
    ]


def _run_delta(args: argparse.Namespace, settings: Any, catalog: Any, policy: Any) -> int:
    """Delta tables' jobs with delta-rs (no Spark); how many failed."""
    from table_topic.delta.maintenance import run_delta_maintenance

    location = _delta_location(settings, catalog)
    if location is None:
        return 0
    results, errors = run_delta_maintenance(location, policy, args.table, args.job, args.force)
    if args.json:
        for r in results:
            print(json.dumps(r.as_dict()))
        for table, job, message in errors:
            print(json.dumps({"table": table, "job": job, "error": message, "format": "delta"}))
    elif results or errors:
        from rich.console import Console
        from rich.table import Table

        out = Table(title="Delta maintenance run")
        for column in ("table", "job", "result", "seconds"):
            out.add_column(column)
        for r in results:
            metrics = ", ".join(f"{k}={v}" for k, v in r.metrics.items())
            out.add_row(r.table, r.job, metrics or "-", f"{r.seconds:.1f}")
        for table, job, message in errors:
            out.add_row(table, job, f"[red]{message}", "")
        Console(width=160).print(out)
    return len(errors)


def _explain_nothing_planned(statuses: Any, policy: Any) -> None:
    """For each table the policy plans nothing for (or no compaction although it has
    small files), its counts against the thresholds."""
    explained = False
    for s in statuses:
        if s.stats is None:
            continue
        if not s.planned:
            print(f"{s.table}: nothing planned: " + "; ".join(_thresholds(s.stats, policy)))
        elif s.stats.small_files and "rewrite_data_files" not in {p.job for p in s.planned}:
            print(f"{s.table}: no compaction: {_thresholds(s.stats, policy)[0]}")
        else:
            continue
        explained = True
    if explained:
        print(
            "The thresholds are [policy] keys (TIDELAKE_MAINTENANCE_*); "
            "--force runs the jobs anyway."
        )


def _thresholds(stats: Any, policy: Any) -> list[str]:
    """Why the policy plans nothing for a table: each job's threshold next to the
    table's count."""
    mib = policy.small_file_bytes() / (1024 * 1024)
    return [
        f"compaction at {policy.min_small_files} small files (< {mib:.0f} MiB, "
        f"min_small_files), has {stats.small_files}",
        f"delete rewrite at {policy.min_delete_files} delete files (min_delete_files), "
        f"has {stats.delete_files}",
        f"manifest rewrite above {policy.max_manifests} (max_manifests), has {stats.manifests}",
        f"snapshot expiry above {policy.max_snapshots} (max_snapshots), has {stats.snapshots}",
    ]


def _anything_planned(catalog: Any, policy: Any, args: argparse.Namespace) -> bool:
    from spark.maintenance import maintenance_status

    for status in maintenance_status(catalog, policy, args.table):
        if status.error is not None:
            return True  # let the run report it
        if any(not args.job or p.job in args.job for p in status.planned):
            return True
    return False


def _open_session(args: argparse.Namespace, settings: Any, spark_settings: Any) -> Any:
    from api.commands.sql import quiet_spark
    from spark.errors import SparkJobError
    from spark.session import create_spark_session

    try:
        with quiet_spark(args.verbose, "starting Spark"):
            return create_spark_session(settings.catalog, spark_settings)
    except SparkJobError as exc:
        print(f"tidelake: cannot start Spark: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _print_report(report: Any, as_json: bool) -> None:
    if as_json:
        for result in report.results:
            print(json.dumps(result.as_dict()))
        for table, job, message in report.errors:
            print(json.dumps({"table": table, "job": job, "error": message}))
        return
    from rich.console import Console
    from rich.table import Table

    out = Table(title=f"Maintenance run ({report.seconds:.1f} s)")
    for column in ("table", "job", "result", "seconds"):
        out.add_column(column)
    for r in report.results:
        metrics = ", ".join(f"{k}={v}" for k, v in r.metrics.items() if v)
        out.add_row(r.table, r.job, metrics or "nothing to do", f"{r.seconds:.1f}")
    for table, job, message in report.errors:
        out.add_row(table, job, f"[red]{message}", "")
    if not report.results and not report.errors:
        out.add_row("-", "-", "no table needs maintenance", "")
    Console(width=160).print(out)


class _Progress:
    """A rich progress line per job, fed by Spark's status tracker."""

    def __init__(self, session: Any, enabled: bool) -> None:
        self._session = session
        self._enabled = enabled and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self._enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            from spark.progress import SparkProgress

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} tasks"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._bar.__enter__()
            self._poller = SparkProgress(self._session, self._update)
            self._poller.__enter__()
        return self

    def job_started(self, table: str, job: str, reason: str) -> None:
        if not self._enabled:
            print(f"{table}: {job} ({reason})", file=sys.stderr)
            return
        with self._lock:
            if self._task is not None:
                self._bar.update(self._task, completed=self._bar.tasks[-1].total or 1)
            self._task = self._bar.add_task(f"{table} {job}", total=None)

    def _update(self, stage: Any) -> None:
        with self._lock:
            if self._task is not None and stage.tasks_total:
                self._bar.update(self._task, completed=stage.tasks_done, total=stage.tasks_total)

    def __exit__(self, *exc: object) -> None:
        if self._enabled:
            self._poller.__exit__(None, None, None)
            self._bar.__exit__(None, None, None)


def _sync(args: argparse.Namespace) -> int:
    from api.settings import load_sync_targets
    from ingest.errors import ConfigError
    from spark.schedule import run_every
    from spark.sync import sync_catalogs

    sync_section = _maintenance_file(args).get("sync", {})
    targets_raw = sync_section.get("targets", [])
    if not targets_raw:
        raise _fail("no sync targets: add [[sync.targets]] to the --maintenance-config file")
    # each target as its entry says: the platform's TIDELAKE_CATALOG_* are not inherited
    try:
        targets = load_sync_targets(targets_raw)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    settings, source = _platform_catalog(args)
    failures = 0

    def once() -> None:
        nonlocal failures
        from catalog.factory import load_platform_catalog

        for target_settings in targets:
            try:
                target = load_platform_catalog(target_settings)
                report = sync_catalogs(
                    source,
                    target,
                    namespaces=args.namespace,
                    dry_run=args.dry_run,
                    owned_prefix=settings.catalog.default_warehouse(),
                )
            except Exception as exc:  # noqa: BLE001 - report and go on with the next target
                failures += 1
                print(f"tidelake: sync into {target_settings.name} failed: {exc}", file=sys.stderr)
                continue
            failures += len(report.errors)
            _print_sync(target_settings.name, report, args.json)

    every = args.every or (
        float(sync_section.get("interval_seconds", 60)) if args.scheduled else None
    )
    if every:
        try:
            run_every(every, once, max_runs=args.max_runs)
        except KeyboardInterrupt:
            pass
    else:
        once()
    return 1 if failures else 0


def _print_sync(target: str, report: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"target": target, **report.as_dict()}))
        return
    for change in report.changes:
        print(f"{target}: {change.action:<10} {change.table}  {change.detail}")
    for table, message in report.errors:
        print(f"{target}: error      {table}  {message}", file=sys.stderr)
    print(
        f"{target}: {len(report.changes)} change(s), {report.unchanged} unchanged"
        + (" (dry run)" if report.dry_run else "")
    )


def _submit_command(args: argparse.Namespace) -> int:
    import shlex

    from spark import submit
    from spark.session import spark_submit_arguments

    settings = settings_from_args(args)
    spark_settings = _spark_settings(args)
    command = [
        "spark-submit",
        *spark_submit_arguments(settings.catalog, spark_settings),
        submit.__file__,
        "--catalog-json",
        settings.catalog.model_dump_json(exclude_defaults=True),
        "--policy-json",
        _policy(args).model_dump_json(exclude_defaults=True),
    ]
    print(shlex.join(command))
    return 0
