"""Catalog browsing: the JSON admin API and ``tidelake tables ...``."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

from api.cli import main as cli_main
from tests.integration.catalog.conftest import assert_error

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False, doc="sales region"),
    NestedField(
        3,
        "point",
        StructType(NestedField(4, "x", IntegerType()), NestedField(5, "y", IntegerType())),
        required=False,
    ),
    identifier_field_ids=[1],
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("point", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.int32())])),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": list(range(start, start + n)),
            "region": ["eu" if i % 2 else "us" for i in range(start, start + n)],
            "point": [{"x": i, "y": -i} for i in range(start, start + n)],
        },
        schema=ARROW,
    )


@pytest.fixture
def sales(rest: RestCatalog, ns: str) -> tuple[str, str]:
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
    )
    order = SortOrder(SortField(source_id=1, transform=IdentityTransform()))
    table = rest.create_table(
        (ns, "sales"), SCHEMA, partition_spec=spec, sort_order=order, properties={"owner": "bi"}
    )
    table.append(rows(0, 10))
    table.append(rows(10, 5))
    return ns, "sales"


def test_namespaces_and_tables_are_listed(http, rest, sales) -> None:
    ns, _ = sales
    rest.create_namespace((ns, "child"))
    names = [n["name"] for n in http.get("/api/v1/catalog/namespaces").json()]
    assert ns in names and f"{ns}.child" in names
    assert http.get(f"/api/v1/catalog/namespaces/{ns}/tables").json() == [
        {"namespace": [ns], "name": "sales", "identifier": f"{ns}.sales"}
    ]
    assert [
        n["name"] for n in http.get("/api/v1/catalog/namespaces", params={"parent": ns}).json()
    ] == [f"{ns}.child"]


def test_describe_shows_schema_with_field_ids_spec_order_and_properties(http, sales) -> None:
    ns, name = sales
    desc = http.get(f"/api/v1/catalog/tables/{ns}/{name}").json()
    assert [(f["id"], f["name"], f["type"], f["required"]) for f in desc["fields"]] == [
        (1, "id", "long", True),
        (2, "region", "string", False),
        (3, "point", "struct", False),
    ]
    assert [(f["id"], f["name"]) for f in desc["fields"][2]["fields"]] == [(4, "x"), (5, "y")]
    assert desc["fields"][1]["doc"] == "sales region"
    assert desc["identifier_field_ids"] == [1]
    assert desc["partition_fields"] == [
        {
            "field_id": 1000,
            "name": "region",
            "source_id": 2,
            "source_name": "region",
            "transform": "identity",
        }
    ]
    assert (
        desc["sort_fields"][0]["source_name"] == "id"
        and desc["sort_fields"][0]["direction"] == "asc"
    )
    assert desc["properties"]["owner"] == "bi"
    assert desc["snapshot_count"] == 2


def test_snapshots_files_and_preview(http, sales) -> None:
    ns, name = sales
    snaps = http.get(f"/api/v1/catalog/tables/{ns}/{name}/snapshots").json()
    assert len(snaps) == 2 and snaps[0]["current"] and snaps[0]["operation"] == "append"
    assert (
        snaps[0]["summary"]["total-records"] == "15"
        and snaps[0]["parent_snapshot_id"] == snaps[1]["snapshot_id"]
    )
    files = http.get(f"/api/v1/catalog/tables/{ns}/{name}/files").json()
    assert files["data_records"] == 15 and files["data_files"] == 4
    assert files["position_delete_files"] == 0 and files["delete_records"] == 0
    assert {f["partition"]["region"] for f in files["files"]} == {"eu", "us"}
    older = http.get(
        f"/api/v1/catalog/tables/{ns}/{name}/files", params={"snapshot_id": snaps[1]["snapshot_id"]}
    ).json()
    assert older["data_records"] == 10
    preview = http.get(f"/api/v1/catalog/tables/{ns}/{name}/preview", params={"limit": 3}).json()
    assert preview["columns"] == ["id", "region", "point"] and len(preview["rows"]) == 3
    assert set(preview["rows"][0]["point"]) == {"x", "y"}


def test_browse_errors_use_the_error_model(http, ns, spec) -> None:
    assert_error(
        http.get(f"/api/v1/catalog/tables/{ns}/missing"), 404, "NoSuchTableException", spec
    )
    assert_error(
        http.get("/api/v1/catalog/namespaces/missing_ns/tables"),
        404,
        "NoSuchNamespaceException",
        spec,
    )
    assert_error(http.get("/api/v1/catalog/tables/a..b/t"), 400, "BadRequestException", spec)
    assert_error(
        http.get(f"/api/v1/catalog/tables/{ns}/t/preview", params={"limit": 0}),
        400,
        "BadRequestException",
        spec,
    )


def test_browse_api_is_in_the_openapi_document(http) -> None:
    doc = http.get("/openapi.json").json()
    for path in (
        "/api/v1/catalog/namespaces",
        "/api/v1/catalog/tables/{namespace}/{table}",
        "/api/v1/catalog/tables/{namespace}/{table}/snapshots",
        "/api/v1/catalog/tables/{namespace}/{table}/files",
        "/api/v1/catalog/tables/{namespace}/{table}/preview",
    ):
        assert path in doc["paths"], path
    assert "TableDescription" in doc["components"]["schemas"]


def test_cli_over_rest(server_url, sales, capsys) -> None:
    ns, name = sales
    assert cli_main(["tables", "list", ns, "--rest-url", server_url]) == 0
    assert f"{ns}  sales" in capsys.readouterr().out
    assert cli_main(["tables", "describe", f"{ns}.{name}", "--rest-url", server_url]) == 0
    out = capsys.readouterr().out
    assert "region" in out and "identity" in out and "owner" in out and "  x" in out
    assert cli_main(["tables", "snapshots", f"{ns}.{name}", "--rest-url", server_url]) == 0
    out = capsys.readouterr().out
    assert "append" in out and "current" in out
    assert (
        cli_main(
            [
                "tables",
                "preview",
                f"{ns}.{name}",
                "--limit",
                "2",
                "--rest-url",
                server_url,
                "--json",
            ]
        )
        == 0
    )
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 2


def test_cli_on_the_embedded_catalog(data_dir, sales, capsys) -> None:
    ns, name = sales
    assert cli_main(["tables", "list", "--data-dir", str(data_dir), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {
        "namespace": [ns],
        "name": name,
        "identifier": f"{ns}.{name}",
        "format": "iceberg",
    } in listed
    assert cli_main(["tables", "describe", f"{ns}.nope", "--data-dir", str(data_dir)]) == 1
    assert "does not exist" in capsys.readouterr().err
