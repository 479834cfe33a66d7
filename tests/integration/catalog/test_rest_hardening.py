"""Issue #14's REST catalog defects: names with '%', bad defaults, lost metadata files."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from tests.integration.catalog.conftest import assert_error

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


def _path(location: str) -> Path:
    return Path(unquote(urlparse(location).path))


def test_namespace_with_percent_round_trips_through_pyiceberg(rest: RestCatalog, ns: str) -> None:
    top = f"{ns}%b"
    rest.create_namespace(top, {"owner": "ops"})
    rest.create_namespace((top, "c%25d"))
    rest.create_namespace((top, "e f%2"))
    assert (top,) in rest.list_namespaces()
    assert rest.list_namespaces(top) == [(top, "c%25d"), (top, "e f%2")]
    assert rest.load_namespace_properties(top)["owner"] == "ops"
    assert rest.namespace_exists((top, "c%25d"))
    assert not rest.namespace_exists((top, "c%d"))
    ident = (top, "c%25d", "t")
    rest.create_table(ident, ROWS.schema).append(ROWS)
    assert rest.list_tables((top, "c%25d")) == [ident]
    assert rest.load_table(ident).scan().to_arrow().num_rows == 2
    rest.drop_table(ident)
    rest.drop_namespace((top, "c%25d"))
    rest.drop_namespace((top, "e f%2"))
    rest.drop_namespace(top)
    assert not rest.namespace_exists(top)


def test_parent_with_percent_is_decoded_once_for_spec_clients(http, rest, ns: str, spec) -> None:
    rest.create_namespace((ns, "a%b"))
    rest.create_namespace((ns, "a%b", "c"))
    listed = http.get("/v1/namespaces", params={"parent": f"{ns}\x1fa%b"})
    assert listed.status_code == 200, listed.text
    assert listed.json()["namespaces"] == [[ns, "a%b", "c"]]
    loaded = http.get(f"/v1/namespaces/{ns}%1Fa%25b")
    assert loaded.status_code == 200 and loaded.json()["namespace"] == [ns, "a%b"]
    created = http.post("/v1/namespaces", json={"namespace": [ns, "100%"]})
    assert created.status_code == 200, created.text
    assert_error(http.get(f"/v1/namespaces/{ns}%1F100"), 404, "NoSuchNamespaceException", spec)


@pytest.mark.parametrize(
    "field_type",
    ["unknown-type", "foo", {"type": "struct", "fields": []}, {"type": "list"}],
)
def test_unknown_field_type_with_initial_default_is_400(http, ns, field_type, spec) -> None:
    field = {"id": 1, "name": "x", "type": field_type, "required": False, "initial-default": "a"}
    body = {"name": "t", "schema": {"type": "struct", "fields": [field]}}
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json=body), 400, "BadRequestException", spec
    )
    assert http.head(f"/v1/namespaces/{ns}/tables/t").status_code == 404


def test_unknown_field_type_with_default_in_a_commit_is_400(http, rest, ns, spec) -> None:
    rest.create_table((ns, "t"), ROWS.schema)
    field = {"id": 2, "name": "y", "type": "nope", "required": False, "write-default": 1}
    update = {
        "action": "add-schema",
        "schema": {"type": "struct", "schema-id": 1, "fields": [field]},
    }
    response = http.post(
        f"/v1/namespaces/{ns}/tables/t", json={"requirements": [], "updates": [update]}
    )
    assert_error(response, 400, "BadRequestException", spec)


@pytest.mark.parametrize("purge", [False, True])
def test_drop_of_a_table_whose_metadata_file_is_gone_is_204(
    http, rest: RestCatalog, ns: str, purge: bool, spec
) -> None:
    table = rest.create_table((ns, "lost"), ROWS.schema)
    table.append(ROWS)
    table = rest.load_table((ns, "lost"))
    table.append(ROWS)
    current = rest.load_table((ns, "lost"))
    data_files = [_path(task.file.file_path) for task in current.scan().plan_files()]
    assert data_files and all(f.exists() for f in data_files)
    os.remove(_path(current.metadata_location))
    path = f"/v1/namespaces/{ns}/tables/lost"
    response = http.delete(path, params={"purgeRequested": str(purge).lower()})
    assert response.status_code == 204, response.text
    assert http.head(path).status_code == 404
    assert_error(http.delete(path), 404, "NoSuchTableException", spec)
    if purge:
        # The first append is known from the previous metadata file and is purged;
        # the second one was only known to the lost file.
        assert sum(f.exists() for f in data_files) <= 1
    else:
        assert all(f.exists() for f in data_files)


def test_purge_with_a_lost_manifest_list_deletes_the_rest_and_is_204(
    http, rest: RestCatalog, ns: str
) -> None:
    table = rest.create_table((ns, "partial"), ROWS.schema)
    table.append(ROWS)
    table = rest.load_table((ns, "partial"))
    table.append(ROWS)
    current = rest.load_table((ns, "partial"))
    snapshots = current.metadata.snapshots
    os.remove(_path(snapshots[0].manifest_list))
    last = [_path(f.file_path) for f in _files_of(current, snapshots[1].snapshot_id)]
    path = f"/v1/namespaces/{ns}/tables/partial"
    response = http.delete(path, params={"purgeRequested": "true"})
    assert response.status_code == 204, response.text
    assert last and not any(f.exists() for f in last)
    assert not _path(current.metadata_location).exists()
    assert http.head(path).status_code == 404


def _files_of(table, snapshot_id: int) -> list:
    return [task.file for task in table.scan(snapshot_id=snapshot_id).plan_files()]


def test_multi_table_commit_is_refused_where_the_backing_catalog_cannot_make_it_atomic(
    server_url: str, spec
) -> None:
    import httpx

    from catalog.app import create_app
    from tests.integration.catalog.conftest import serve

    upstream = RestCatalog("upstream", uri=server_url)
    ns = f"tx_{os.urandom(4).hex()}"
    upstream.create_namespace(ns)
    uuids = {n: str(upstream.create_table((ns, n), ROWS.schema).metadata.table_uuid) for n in "ab"}

    def change(name: str) -> dict[str, object]:
        return {
            "identifier": {"namespace": [ns], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuids[name]}],
            "updates": [{"action": "set-properties", "updates": {"tx": "1"}}],
        }

    # A REST catalog served over another REST catalog: no multi-table transaction below.
    with serve(create_app(catalog=upstream)) as base, httpx.Client(base_url=base) as proxy:
        assert (
            "POST /v1/{prefix}/transactions/commit"
            not in (proxy.get("/v1/config").json()["endpoints"])
        )
        both = {"table-changes": [change("a"), change("b")]}
        assert_error(
            proxy.post("/v1/transactions/commit", json=both),
            406,
            "UnsupportedOperationException",
            spec,
        )
        assert "tx" not in upstream.load_table((ns, "a")).properties
        assert "tx" not in upstream.load_table((ns, "b")).properties
        one = {"table-changes": [change("b")]}
        assert proxy.post("/v1/transactions/commit", json=one).status_code == 204
        assert upstream.load_table((ns, "b")).properties["tx"] == "1"


def test_plus_and_space_in_names_round_trip_through_pyiceberg(rest: RestCatalog, ns: str) -> None:
    ident = (ns, "p+q r", "s+t u")
    rest.create_namespace(ident[:2])
    rest.create_table(ident, ROWS.schema).append(ROWS)
    assert rest.list_tables(ident[:2]) == [ident]
    assert rest.load_table(ident).scan().to_arrow().num_rows == 2
    assert rest.list_namespaces(ns) == [ident[:2]]
