"""Catalog sync re-points mirrored tables in place: a reader never finds one missing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

from catalog.app import create_app
from catalog.config import CatalogSettings
from spark.sync import sync_catalogs
from tests.integration.catalog.conftest import serve

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})
SYNCS = 12


def _sql(path: Path, name: str) -> SqlCatalog:
    path.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(name, uri=f"sqlite:///{path / 'c.db'}", warehouse=path.as_uri())


@pytest.fixture(params=["sql", "rest"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    if request.param == "sql":
        yield _sql(tmp_path / "target", "mirror")
        return
    with serve(create_app(CatalogSettings(data_dir=tmp_path / "rest"))) as url:
        yield RestCatalog("mirror", uri=url)


def test_a_concurrent_reader_always_finds_the_table_during_syncs(
    tmp_path: Path, target: Catalog
) -> None:
    source = _sql(tmp_path / "source", "platform")
    source.create_namespace("db")
    table = source.create_table(("db", "t"), ROWS.schema)
    table.append(ROWS)
    first = sync_catalogs(source, target, owned_prefix=tmp_path.as_uri())
    assert first.count("register") == 1 and not first.errors

    missing: list[int] = []
    reads = [0]
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                target.load_table(("db", "t"))
            except NoSuchTableError:
                missing.append(reads[0])
            reads[0] += 1

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for _ in range(SYNCS):
            source.load_table(("db", "t")).append(ROWS)
            report = sync_catalogs(source, target, owned_prefix=tmp_path.as_uri())
            assert report.count("update") == 1 and not report.errors, report.as_dict()
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert reads[0] > SYNCS
    assert not missing, f"the table was missing in {len(missing)} of {reads[0]} reads"
    mirrored = target.load_table(("db", "t"))
    assert mirrored.metadata_location == source.load_table(("db", "t")).metadata_location
    assert mirrored.scan().to_arrow().num_rows == 2 * (SYNCS + 1)


def test_sql_mirror_update_fails_when_someone_else_moved_the_pointer(tmp_path: Path) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from spark.sync import mirror_target

    source = _sql(tmp_path / "source", "platform")
    source.create_namespace("db")
    table = source.create_table(("db", "t"), ROWS.schema)
    old = table.metadata_location
    table.append(ROWS)
    new = source.load_table(("db", "t")).metadata_location
    target = _sql(tmp_path / "target", "mirror")
    target.create_namespace("db")
    target.register_table(("db", "t"), new)
    with pytest.raises(CommitFailedException):
        mirror_target(target).update("db.t", old, new)
    mirror_target(target).update("db.t", new, old)
    assert target.load_table(("db", "t")).metadata_location == old


def test_a_target_that_refuses_overwrite_keeps_its_entry_and_reports_an_error() -> None:
    from spark.errors import CatalogSyncError
    from spark.sync.targets import MirrorTarget

    calls: list[str] = []

    class NoOverwrite:
        name = "third-party"

        def register_table(self, identifier: str, location: str, overwrite: bool = False) -> None:
            calls.append(f"register overwrite={overwrite}")
            raise NotImplementedError("406")

        def drop_table(self, identifier: str) -> None:
            calls.append("drop")

    with pytest.raises(CatalogSyncError, match="stays at old.json"):
        MirrorTarget(NoOverwrite()).update("db.t", "old.json", "new.json")  # type: ignore[arg-type]
    assert calls == ["register overwrite=True"]
