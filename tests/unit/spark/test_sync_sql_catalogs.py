"""Catalog sync between two local SQL catalogs (the generic drop-and-register path)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import Catalog

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.sync import sync_catalogs

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _catalogs(tmp_path: Path) -> tuple[Catalog, Catalog, str]:
    source_settings = CatalogSettings(data_dir=tmp_path / "source")
    source = load_platform_catalog(source_settings)
    target = load_platform_catalog(CatalogSettings(data_dir=tmp_path / "target"))
    return source, target, source_settings.default_warehouse()


def test_sync_registers_updates_and_drops_and_is_idempotent(tmp_path: Path) -> None:
    source, target, owned = _catalogs(tmp_path)
    source.create_namespace("ns")
    a = source.create_table("ns.a", schema=SCHEMA)
    source.create_table("ns.b", schema=SCHEMA)

    first = sync_catalogs(source, target, owned_prefix=owned)
    assert sorted((c.action, c.table) for c in first.changes) == [
        ("create_namespace", "ns"),
        ("register", "ns.a"),
        ("register", "ns.b"),
    ]
    assert sync_catalogs(source, target, owned_prefix=owned).changes == []

    a.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    source.drop_table("ns.b")
    report = sync_catalogs(source, target, owned_prefix=owned)
    assert sorted((c.action, c.table) for c in report.changes) == [
        ("drop", "ns.b"),
        ("update", "ns.a"),
    ]
    assert target.load_table("ns.a").metadata_location == a.metadata_location
    assert target.load_table("ns.a").scan().to_arrow().num_rows == 2
    assert not target.table_exists("ns.b")


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    source, target, owned = _catalogs(tmp_path)
    source.create_namespace("ns")
    source.create_table("ns.a", schema=SCHEMA)
    report = sync_catalogs(source, target, dry_run=True, owned_prefix=owned)
    assert [c.action for c in report.changes] == ["create_namespace", "register"]
    assert target.list_namespaces() == []


def test_tables_outside_the_owned_warehouse_are_never_dropped(tmp_path: Path) -> None:
    source, target, owned = _catalogs(tmp_path)
    source.create_namespace("ns")
    source.create_table("ns.a", schema=SCHEMA)
    sync_catalogs(source, target, owned_prefix=owned)
    target.create_table("ns.local", schema=SCHEMA)  # lives in the target's own warehouse
    report = sync_catalogs(source, target, owned_prefix=owned)
    assert report.changes == [] and target.table_exists("ns.local")
    # Without an owned prefix nothing is dropped at all.
    source.drop_table("ns.a")
    assert sync_catalogs(source, target).changes == []
