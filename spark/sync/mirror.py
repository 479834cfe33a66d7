"""Mirror the platform catalog's tables into another catalog, idempotently.

For every source table the target gets an entry pointing at the same current
metadata file: registered when missing, re-pointed when the source has committed
since, left alone when already current. Target tables that the source no longer
has are dropped (the entry only, never files), but only when their metadata lives
under ``owned_prefix`` (the platform's warehouse), so tables that other tools keep
in the same target namespaces are never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError

from spark.sync.targets import mirror_target

__all__ = ["SyncChange", "SyncReport", "sync_catalogs"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncChange:
    action: str  # create_namespace | register | update | drop
    table: str
    detail: str = ""


@dataclass
class SyncReport:
    changes: list[SyncChange] = field(default_factory=list)
    unchanged: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    dry_run: bool = False

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    def as_dict(self) -> dict[str, Any]:
        return {
            "changes": [c.__dict__ for c in self.changes],
            "unchanged": self.unchanged,
            "errors": [{"table": t, "error": e} for t, e in self.errors],
            "dry_run": self.dry_run,
        }


def _namespaces(catalog: Catalog) -> list[str]:
    out: list[str] = []
    pending = [tuple(ns) for ns in catalog.list_namespaces()]
    while pending:
        ns = pending.pop()
        out.append(".".join(ns))
        try:
            pending.extend(tuple(c) for c in catalog.list_namespaces(ns) if tuple(c) != ns)
        except Exception:  # noqa: BLE001 - flat catalogs reject nested listing
            pass
    return sorted(set(out))


def _tables(catalog: Catalog, namespace: str) -> list[str]:
    try:
        return sorted(".".join(ident) for ident in catalog.list_tables(namespace))
    except NoSuchNamespaceError:
        return []


def sync_catalogs(
    source: Catalog,
    target: Catalog,
    *,
    namespaces: Sequence[str] | None = None,
    dry_run: bool = False,
    owned_prefix: str | None = None,
    remove_dropped: bool = True,
) -> SyncReport:
    """Make ``target`` list the tables of ``source`` (in ``namespaces``, default all).

    Returns what changed. Per-table failures are collected in ``errors``; the rest of
    the tables are still synced. Running it twice in a row changes nothing the second time.
    """
    report = SyncReport(dry_run=dry_run)
    mirror = mirror_target(target)
    wanted = list(namespaces) if namespaces else _namespaces(source)
    target_namespaces = {ns for ns in _namespaces(target)}
    for namespace in wanted:
        source_tables = _tables(source, namespace)
        if namespace not in target_namespaces and source_tables:
            report.changes.append(SyncChange("create_namespace", namespace))
            if not dry_run:
                try:
                    target.create_namespace(namespace)
                except NamespaceAlreadyExistsError:
                    pass
                except Exception as exc:  # noqa: BLE001 - e.g. nested namespaces in Glue
                    report.errors.append((namespace, f"cannot create namespace: {exc}"))
                    continue
        for identifier in source_tables:
            try:
                _sync_table(source, mirror, identifier, report, dry_run)
            except Exception as exc:  # noqa: BLE001 - report, go on with the next table
                _log.warning("sync %s failed: %s", identifier, exc)
                report.errors.append((identifier, f"{type(exc).__name__}: {exc}"))
        if remove_dropped and namespace in target_namespaces:
            keep = set(source_tables)
            for identifier in _tables(target, namespace):
                if identifier in keep:
                    continue
                try:
                    location = mirror.metadata_location(identifier)
                    if (
                        location is None
                        or not owned_prefix
                        or not location.startswith(owned_prefix)
                    ):
                        continue
                    report.changes.append(SyncChange("drop", identifier, location))
                    if not dry_run:
                        mirror.drop(identifier)
                except Exception as exc:  # noqa: BLE001
                    report.errors.append((identifier, f"{type(exc).__name__}: {exc}"))
    return report


def _sync_table(
    source: Catalog, mirror: Any, identifier: str, report: SyncReport, dry_run: bool
) -> None:
    wanted = source.load_table(identifier).metadata_location
    current = mirror.metadata_location(identifier)
    if current == wanted:
        report.unchanged += 1
        return
    if current is None:
        report.changes.append(SyncChange("register", identifier, wanted))
        if not dry_run:
            mirror.register(identifier, wanted)
        return
    report.changes.append(SyncChange("update", identifier, f"{current} -> {wanted}"))
    if not dry_run:
        mirror.update(identifier, current, wanted)
