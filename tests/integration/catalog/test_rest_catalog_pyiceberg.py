"""pyiceberg's RestCatalog against Tidelake's built-in Iceberg REST catalog."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def test_config_advertises_endpoints_and_warehouse(http, spec) -> None:
    from tests.integration.catalog.conftest import check_schema

    body = http.get("/v1/config").json()
    check_schema(spec, "CatalogConfig", body)
    assert "POST /v1/{prefix}/transactions/commit" in body["endpoints"]
    assert body["overrides"]["warehouse"].startswith("file://")


def test_namespace_lifecycle(rest: RestCatalog, ns: str) -> None:
    assert (ns,) in rest.list_namespaces()
    rest.create_namespace((ns, "child"), {"owner": "ops"})
    assert rest.list_namespaces(ns) == [(ns, "child")]
    assert rest.load_namespace_properties((ns, "child"))["owner"] == "ops"
    summary = rest.update_namespace_properties(
        (ns, "child"), removals={"owner", "nope"}, updates={"team": "x"}
    )
    assert (
        summary.updated == ["team"] and summary.removed == ["owner"] and summary.missing == ["nope"]
    )
    props = rest.load_namespace_properties((ns, "child"))
    assert props["team"] == "x" and "owner" not in props
    with pytest.raises(NamespaceAlreadyExistsError):
        rest.create_namespace((ns, "child"))
    assert rest.namespace_exists((ns, "child"))
    rest.drop_namespace((ns, "child"))
    assert not rest.namespace_exists((ns, "child"))
    with pytest.raises(NoSuchNamespaceError):
        rest.load_namespace_properties((ns, "child"))


def test_create_append_read_and_evolve(rest: RestCatalog, ns: str) -> None:
    table = rest.create_table(
        (ns, "events"), ROWS.schema, properties={"write.format.default": "parquet"}
    )
    table.append(ROWS)
    table.append(ROWS)
    loaded = rest.load_table((ns, "events"))
    assert loaded.scan().to_arrow().num_rows == 6
    assert len(loaded.snapshots()) == 2
    with loaded.update_schema() as update:
        update.add_column("score", LongType())
        update.rename_column("name", "label")
    evolved = rest.load_table((ns, "events"))
    assert [f.name for f in evolved.schema().fields] == ["id", "label", "score"]
    assert evolved.schema().find_field("score").field_id == 3
    evolved.append(
        pa.table(
            {"id": pa.array([9], pa.int64()), "label": ["z"], "score": pa.array([7], pa.int64())}
        )
    )
    result = rest.load_table((ns, "events")).scan(row_filter="score = 7").to_arrow()
    assert result.to_pylist() == [{"id": 9, "label": "z", "score": 7}]
    with evolved.transaction() as txn:
        txn.set_properties({"owner": "tidelake"})
    assert rest.load_table((ns, "events")).properties["owner"] == "tidelake"


def test_partitioned_table_with_transforms(rest: RestCatalog, ns: str) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestamptzType(), required=False),
        NestedField(3, "kind", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
    )
    table = rest.create_table((ns, "parted"), schema, partition_spec=spec)
    now = dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC)
    table.append(
        pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "ts": pa.array(
                    [now, now + dt.timedelta(days=1), now], pa.timestamp("us", tz="UTC")
                ),
                "kind": ["a", "b", "c"],
            }
        )
    )
    loaded = rest.load_table((ns, "parted"))
    assert [f.name for f in loaded.spec().fields] == ["ts_day", "id_bucket"]
    assert loaded.scan().to_arrow().num_rows == 3
    assert len(loaded.inspect.files()) >= 2


def test_rename_and_drop(rest: RestCatalog, ns: str) -> None:
    rest.create_table((ns, "a"), ROWS.schema)
    rest.create_namespace((ns, "other"))
    rest.rename_table((ns, "a"), (ns, "other", "b"))
    assert not rest.table_exists((ns, "a"))
    assert rest.table_exists((ns, "other", "b"))
    rest.create_table((ns, "c"), ROWS.schema)
    with pytest.raises(TableAlreadyExistsError):
        rest.rename_table((ns, "c"), (ns, "other", "b"))
    with pytest.raises(NoSuchTableError):
        rest.rename_table((ns, "missing"), (ns, "d"))
    with pytest.raises(NamespaceNotEmptyError):
        rest.drop_namespace((ns, "other"))
    rest.drop_table((ns, "other", "b"))
    rest.drop_namespace((ns, "other"))
    with pytest.raises(NoSuchTableError):
        rest.drop_table((ns, "other", "b"))


def test_purge_removes_data_files(rest: RestCatalog, ns: str) -> None:
    table = rest.create_table((ns, "purged"), ROWS.schema)
    table.append(ROWS)
    data_files = [urlparse(f.file.file_path).path for f in table.scan().plan_files()]
    assert data_files and all(Path(p).exists() for p in data_files)
    rest.purge_table((ns, "purged"))
    assert not rest.table_exists((ns, "purged"))
    assert not any(Path(p).exists() for p in data_files)


def test_register_existing_metadata(rest: RestCatalog, ns: str) -> None:
    table = rest.create_table((ns, "orig"), ROWS.schema)
    table.append(ROWS)
    location = rest.load_table((ns, "orig")).metadata_location
    rest.drop_table((ns, "orig"))
    registered = rest.register_table((ns, "again"), location)
    assert registered.scan().to_arrow().num_rows == 3
    with pytest.raises(TableAlreadyExistsError):
        rest.register_table((ns, "again"), location)


def test_stage_create_commits_with_first_append(rest: RestCatalog, ns: str) -> None:
    txn = rest.create_table_transaction((ns, "ctas"), ROWS.schema, properties={"k": "v"})
    assert not rest.table_exists((ns, "ctas"))
    txn.append(ROWS)
    txn.commit_transaction()
    table = rest.load_table((ns, "ctas"))
    assert table.properties["k"] == "v"
    assert table.scan().to_arrow().num_rows == 3


def test_stage_create_loses_to_a_concurrent_create(rest: RestCatalog, ns: str) -> None:
    txn = rest.create_table_transaction((ns, "race"), ROWS.schema)
    rest.create_table((ns, "race"), ROWS.schema)
    with pytest.raises(CommitFailedException):
        txn.commit_transaction()


def test_concurrent_append_conflict_is_409_and_not_half_committed(server_url: str, ns: str) -> None:
    props = {"commit.retry.num-retries": "0"}
    first = RestCatalog("a", uri=server_url)
    second = RestCatalog("b", uri=server_url)
    first.create_table((ns, "contended"), ROWS.schema, properties=props)
    t1 = first.load_table((ns, "contended"))
    t2 = second.load_table((ns, "contended"))
    t1.append(ROWS)
    with pytest.raises(CommitFailedException):
        t2.append(ROWS)
    final = first.load_table((ns, "contended"))
    assert len(final.snapshots()) == 1
    assert final.scan().to_arrow().num_rows == 3


def test_listing_pages_through_pyiceberg(server_url: str, ns: str) -> None:
    paged = RestCatalog("paged", uri=server_url, **{"rest-page-size": "2"})
    for i in range(5):
        paged.create_table((ns, f"t{i}"), ROWS.schema)
    assert sorted(paged.list_tables(ns)) == [(ns, f"t{i}") for i in range(5)]
    for i in range(3):
        paged.create_namespace((ns, f"c{i}"))
    assert paged.list_namespaces(ns) == [(ns, f"c{i}") for i in range(3)]


def test_names_with_spaces_and_unicode_round_trip(rest: RestCatalog, ns: str) -> None:
    rest.create_namespace((ns, "sub space"))
    rest.create_namespace((ns, "sub space", "ünï"))
    assert rest.list_namespaces((ns, "sub space")) == [(ns, "sub space", "ünï")]
    ident = (ns, "sub space", "my täble")
    rest.create_table(ident, ROWS.schema).append(ROWS)
    assert rest.list_tables((ns, "sub space")) == [ident]
    assert rest.load_table(ident).scan().to_arrow().num_rows == 3
