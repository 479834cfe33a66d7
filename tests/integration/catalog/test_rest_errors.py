"""Bad input to the REST catalog gets the spec's status and error body, and changes nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from tests.integration.catalog.conftest import assert_error, check_schema

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


@pytest.fixture
def table_path(rest: RestCatalog, ns: str) -> str:
    rest.create_table((ns, "t"), ROWS.schema).append(ROWS)
    return f"/v1/namespaces/{ns}/tables/t"


def test_unknown_namespace_is_404_no_such_namespace(http, spec) -> None:
    assert_error(http.get("/v1/namespaces/nope_ns"), 404, "NoSuchNamespaceException", spec)
    assert_error(http.get("/v1/namespaces/nope_ns/tables"), 404, "NoSuchNamespaceException", spec)
    assert_error(http.delete("/v1/namespaces/nope_ns"), 404, "NoSuchNamespaceException", spec)
    assert_error(
        http.get("/v1/namespaces", params={"parent": "nope_ns"}),
        404,
        "NoSuchNamespaceException",
        spec,
    )
    assert http.head("/v1/namespaces/nope_ns").status_code == 404
    create = {"name": "t", "schema": SCHEMA}
    assert_error(
        http.post("/v1/namespaces/nope_ns/tables", json=create),
        404,
        "NoSuchNamespaceException",
        spec,
    )
    staged = {**create, "stage-create": True}
    assert_error(
        http.post("/v1/namespaces/nope_ns/tables", json=staged),
        404,
        "NoSuchNamespaceException",
        spec,
    )


def test_unknown_table_is_404_no_such_table(http, ns, spec) -> None:
    path = f"/v1/namespaces/{ns}/tables/missing"
    assert_error(http.get(path), 404, "NoSuchTableException", spec)
    assert_error(http.delete(path), 404, "NoSuchTableException", spec)
    assert http.head(path).status_code == 404
    assert_error(
        http.post(path, json={"requirements": [], "updates": []}), 404, "NoSuchTableException", spec
    )
    report = {"report-type": "scan-report"}
    assert_error(http.post(path + "/metrics", json=report), 404, "NoSuchTableException", spec)


def test_existing_names_are_409_already_exists(http, ns, table_path, spec) -> None:
    assert_error(
        http.post("/v1/namespaces", json={"namespace": [ns]}), 409, "AlreadyExistsException", spec
    )
    create = {"name": "t", "schema": SCHEMA}
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json=create), 409, "AlreadyExistsException", spec
    )
    assert_error(http.delete(f"/v1/namespaces/{ns}"), 409, "NamespaceNotEmptyException", spec)


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": []},
        {"namespace": [""]},
        {"namespace": ["a.b"]},
        {"namespace": ["a?b"]},
        {"namespace": ["a/b"]},
        {"namespace": "flat"},
        {"namespace": [1]},
        {},
    ],
)
def test_invalid_namespace_identifiers_are_400(http, body, spec) -> None:
    assert_error(http.post("/v1/namespaces", json=body), 400, "BadRequestException", spec)


def test_invalid_table_identifiers_are_400(http, ns, table_path, spec) -> None:
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json={"name": "", "schema": SCHEMA}),
        400,
        "BadRequestException",
        spec,
    )
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json={"name": "x"}),
        400,
        "BadRequestException",
        spec,
    )
    rename = {
        "source": {"namespace": [ns], "name": "t"},
        "destination": {"namespace": [], "name": "u"},
    }
    assert_error(http.post("/v1/tables/rename", json=rename), 400, "BadRequestException", spec)
    assert_error(http.get(f"/v1/namespaces/{ns}%1F/tables"), 400, "BadRequestException", spec)


def test_malformed_json_is_400(http, ns, table_path, spec) -> None:
    headers = {"Content-Type": "application/json"}
    for path in (
        "/v1/namespaces",
        f"/v1/namespaces/{ns}/tables",
        table_path,
        "/v1/transactions/commit",
    ):
        assert_error(
            http.post(path, content=b"{not json", headers=headers), 400, "BadRequestException", spec
        )
    assert_error(http.post("/v1/namespaces", json=["a", "list"]), 400, "BadRequestException", spec)


def test_properties_in_both_updates_and_removals_is_422(http, ns, spec) -> None:
    body = {"removals": ["a"], "updates": {"a": "1"}}
    assert_error(
        http.post(f"/v1/namespaces/{ns}/properties", json=body),
        422,
        "UnprocessableEntityException",
        spec,
    )


def test_unknown_update_or_requirement_is_400_and_changes_nothing(
    http, rest, ns, table_path, spec
) -> None:
    before = http.get(table_path).json()["metadata-location"]
    unknown_update = {"requirements": [], "updates": [{"action": "explode-table"}]}
    assert_error(http.post(table_path, json=unknown_update), 400, "BadRequestException", spec)
    unknown_req = {"requirements": [{"type": "assert-the-moon"}], "updates": []}
    assert_error(http.post(table_path, json=unknown_req), 400, "BadRequestException", spec)
    # A known update that cannot apply: the current schema id does not exist.
    bad = {"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 42}]}
    assert_error(http.post(table_path, json=bad), 400, "BadRequestException", spec)
    assert http.get(table_path).json()["metadata-location"] == before


@pytest.mark.parametrize(
    "requirement",
    [
        {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 99},
        {"type": "assert-current-schema-id", "current-schema-id": 7},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 5},
        {"type": "assert-default-spec-id", "default-spec-id": 3},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 9},
        {"type": "assert-create"},
    ],
)
def test_failed_requirement_is_409_commit_failed(http, table_path, requirement, spec) -> None:
    before = http.get(table_path).json()
    body = {
        "requirements": [requirement],
        "updates": [{"action": "set-properties", "updates": {"x": "1"}}],
    }
    assert_error(http.post(table_path, json=body), 409, "CommitFailedException", spec)
    after = http.get(table_path).json()
    assert after["metadata-location"] == before["metadata-location"]
    assert "x" not in after["metadata"]["properties"]


def test_every_requirement_that_holds_lets_the_commit_through(http, table_path, spec) -> None:
    meta = http.get(table_path).json()["metadata"]
    requirements = [
        {"type": "assert-table-uuid", "uuid": meta["table-uuid"]},
        {
            "type": "assert-ref-snapshot-id",
            "ref": "main",
            "snapshot-id": meta["current-snapshot-id"],
        },
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": meta["last-column-id"]},
        {"type": "assert-current-schema-id", "current-schema-id": meta["current-schema-id"]},
        {
            "type": "assert-last-assigned-partition-id",
            "last-assigned-partition-id": meta["last-partition-id"],
        },
        {"type": "assert-default-spec-id", "default-spec-id": meta["default-spec-id"]},
        {
            "type": "assert-default-sort-order-id",
            "default-sort-order-id": meta["default-sort-order-id"],
        },
    ]
    body = {
        "requirements": requirements,
        "updates": [{"action": "set-properties", "updates": {"ok": "yes"}}],
    }
    response = http.post(table_path, json=body)
    assert response.status_code == 200, response.text
    check_schema(spec, "CommitTableResponse", response.json())
    assert response.json()["metadata"]["properties"]["ok"] == "yes"


def test_stale_commit_after_another_commit_is_409(http, table_path, spec) -> None:
    meta = http.get(table_path).json()["metadata"]
    snapshot = meta["current-snapshot-id"]
    stale = {
        "requirements": [
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot}
        ],
        "updates": [{"action": "set-properties", "updates": {"n": "1"}}],
    }
    assert http.post(table_path, json=stale).status_code == 200
    http.post(
        table_path,
        json={
            "requirements": [],
            "updates": [{"action": "remove-snapshot-ref", "ref-name": "main"}],
        },
    )
    assert_error(http.post(table_path, json=stale), 409, "CommitFailedException", spec)


def test_multi_table_transaction_is_all_or_nothing(http, rest, ns, spec) -> None:
    for name in ("x", "y"):
        rest.create_table((ns, name), ROWS.schema)
    uuid_x = http.get(f"/v1/namespaces/{ns}/tables/x").json()["metadata"]["table-uuid"]

    def change(name: str, uuid: str) -> dict:
        return {
            "identifier": {"namespace": [ns], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {"txn": "1"}}],
        }

    uuid_y = http.get(f"/v1/namespaces/{ns}/tables/y").json()["metadata"]["table-uuid"]
    failing = {
        "table-changes": [change("x", uuid_x), change("y", "00000000-0000-0000-0000-000000000000")]
    }
    assert_error(
        http.post("/v1/transactions/commit", json=failing), 409, "CommitFailedException", spec
    )
    assert "txn" not in rest.load_table((ns, "x")).properties
    missing = {"table-changes": [change("x", uuid_x), change("nope", uuid_y)]}
    assert_error(
        http.post("/v1/transactions/commit", json=missing), 404, "NoSuchTableException", spec
    )
    no_ident = {"table-changes": [{"requirements": [], "updates": []}]}
    assert_error(
        http.post("/v1/transactions/commit", json=no_ident), 400, "BadRequestException", spec
    )
    ok = {"table-changes": [change("x", uuid_x), change("y", uuid_y)]}
    assert http.post("/v1/transactions/commit", json=ok).status_code == 204
    assert rest.load_table((ns, "x")).properties["txn"] == "1"
    assert rest.load_table((ns, "y")).properties["txn"] == "1"


def test_pagination_tokens(http, ns, spec) -> None:
    for i in range(3):
        assert http.post("/v1/namespaces", json={"namespace": [ns, f"p{i}"]}).status_code == 200
    seen: list[list[str]] = []
    token = ""
    while True:
        body = http.get(
            "/v1/namespaces", params={"parent": ns, "pageToken": token, "pageSize": 2}
        ).json()
        check_schema(spec, "ListNamespacesResponse", body)
        seen.extend(body["namespaces"])
        token = body["next-page-token"]
        if token is None:
            break
    assert seen == [[ns, "p0"], [ns, "p1"], [ns, "p2"]]
    everything = http.get("/v1/namespaces", params={"parent": ns}).json()
    assert everything["next-page-token"] is None and len(everything["namespaces"]) == 3
    assert_error(
        http.get("/v1/namespaces", params={"pageToken": "!!!"}), 400, "BadRequestException", spec
    )
    assert_error(
        http.get("/v1/namespaces", params={"pageSize": 0}), 400, "BadRequestException", spec
    )


def test_load_table_result_matches_spec_and_supports_etag(http, table_path, spec) -> None:
    response = http.get(table_path)
    body = response.json()
    check_schema(spec, "LoadTableResult", body)
    assert body["metadata-location"].endswith(".metadata.json")
    etag = response.headers["ETag"]
    assert http.get(table_path, headers={"If-None-Match": etag}).status_code == 304
    refs = http.get(table_path, params={"snapshots": "refs"}).json()
    assert len(refs["metadata"]["snapshots"]) == 1


def test_metrics_report_is_accepted(http, table_path) -> None:
    report = {
        "report-type": "scan-report",
        "table-name": "t",
        "snapshot-id": 1,
        "filter": True,
        "schema-id": 0,
        "projected-field-ids": [1],
        "projected-field-names": ["id"],
        "metrics": {},
    }
    assert http.post(table_path + "/metrics", json=report).status_code == 204
    assert_error(
        http.post(table_path + "/metrics", json={"no": "type"}), 400, "BadRequestException", None
    )


def test_unknown_route_and_warehouse(http, spec) -> None:
    assert_error(http.get("/v1/nothing/here"), 404, "NotFoundException", spec)
    assert_error(
        http.get("/v1/config", params={"warehouse": "s3://elsewhere"}),
        404,
        "NoSuchWarehouseException",
        spec,
    )


def test_namespace_with_children_is_not_empty(http, rest, ns, spec) -> None:
    rest.create_namespace((ns, "kid"))
    assert_error(http.delete(f"/v1/namespaces/{ns}"), 409, "NamespaceNotEmptyException", spec)
    assert rest.namespace_exists((ns, "kid"))


def test_properties_of_unknown_namespace_is_404(http, spec) -> None:
    body = {"removals": [], "updates": {"a": "1"}}
    assert_error(
        http.post("/v1/namespaces/nope_ns/properties", json=body),
        404,
        "NoSuchNamespaceException",
        spec,
    )


def test_register_with_overwrite_repoints_in_place_on_sql(http, rest, ns, table_path, spec) -> None:
    first = http.get(table_path).json()["metadata-location"]
    rest.load_table((ns, "t")).append(ROWS)
    second = http.get(table_path).json()["metadata-location"]
    body = {"name": "t", "metadata-location": first, "overwrite": True}
    response = http.post(f"/v1/namespaces/{ns}/register", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] == first
    assert http.get(table_path).json()["metadata-location"] == first
    body = {"name": "t", "metadata-location": second}
    assert_error(
        http.post(f"/v1/namespaces/{ns}/register", json=body), 409, "AlreadyExistsException", spec
    )
    body = {"name": "fresh", "metadata-location": second, "overwrite": True}
    assert http.post(f"/v1/namespaces/{ns}/register", json=body).status_code == 200
    body = {"name": "u", "metadata-location": "file:///nowhere/v1.metadata.json"}
    response = http.post(f"/v1/namespaces/{ns}/register", json=body)
    assert_error(response, 400, "BadRequestException", spec)
    assert http.head(f"/v1/namespaces/{ns}/tables/u").status_code == 404


def test_commit_identifier_must_match_the_path(http, ns, table_path, spec) -> None:
    body = {"identifier": {"namespace": [ns], "name": "other"}, "requirements": [], "updates": []}
    assert_error(http.post(table_path, json=body), 400, "BadRequestException", spec)


def test_updates_pyiceberg_cannot_apply_are_400(http, table_path, spec) -> None:
    for update in (
        {
            "action": "add-encryption-key",
            "encryption-key": {"key-id": "k", "encrypted-key-metadata": "AA=="},
        },
        {"action": "add-view-version", "view-version": {}},
    ):
        body = {"requirements": [], "updates": [update]}
        assert_error(http.post(table_path, json=body), 400, "BadRequestException", spec)


def test_successful_responses_match_the_spec(http, ns, table_path, spec) -> None:
    created = http.post("/v1/namespaces", json={"namespace": [ns, "s"], "properties": {"a": "1"}})
    check_schema(spec, "CreateNamespaceResponse", created.json())
    check_schema(spec, "GetNamespaceResponse", http.get(f"/v1/namespaces/{ns}%1Fs").json())
    update = http.post(
        f"/v1/namespaces/{ns}%1Fs/properties", json={"removals": ["a"], "updates": {"b": "2"}}
    )
    check_schema(spec, "UpdateNamespacePropertiesResponse", update.json())
    check_schema(spec, "ListTablesResponse", http.get(f"/v1/namespaces/{ns}/tables").json())
    staged = http.post(
        f"/v1/namespaces/{ns}/tables",
        json={"name": "staged", "schema": SCHEMA, "stage-create": True},
    )
    assert staged.status_code == 200 and staged.json()["metadata-location"] is None
    check_schema(spec, "LoadTableResult", staged.json())
    assert http.head(f"/v1/namespaces/{ns}/tables/staged").status_code == 404


def test_concurrent_commits_to_one_table_lose_cleanly(
    server_url: str, rest: RestCatalog, ns: str
) -> None:
    import threading

    from pyiceberg.exceptions import CommitFailedException

    rest.create_table((ns, "hot"), ROWS.schema, properties={"commit.retry.num-retries": "0"})
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer() -> None:
        client = RestCatalog("w", uri=server_url)
        for _ in range(4):
            table = client.load_table((ns, "hot"))
            try:
                table.append(ROWS)
                result = "ok"
            except CommitFailedException:
                result = "conflict"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 16 and set(outcomes) <= {"ok", "conflict"}
    final = rest.load_table((ns, "hot"))
    assert len(final.snapshots()) == outcomes.count("ok")
    assert final.scan().to_arrow().num_rows == 2 * outcomes.count("ok")


@pytest.mark.parametrize("name", ["x#y", "x?y", "x%y", "x\\y", "x\ty"])
def test_table_names_that_break_file_locations_are_400(http, ns, name, spec) -> None:
    body = {"name": name, "schema": SCHEMA}
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json=body), 400, "BadRequestException", spec
    )


def test_idempotency_key_replays_finalized_answers(http, ns, spec) -> None:
    import uuid as _uuid

    key = {"Idempotency-Key": str(_uuid.uuid4())}
    body = {"name": "once", "schema": SCHEMA}
    first = http.post(f"/v1/namespaces/{ns}/tables", json=body, headers=key)
    again = http.post(f"/v1/namespaces/{ns}/tables", json=body, headers=key)
    assert first.status_code == again.status_code == 200
    assert first.json()["metadata-location"] == again.json()["metadata-location"]
    assert_error(
        http.post(f"/v1/namespaces/{ns}/tables", json=body), 409, "AlreadyExistsException", spec
    )

    drop_key = {"Idempotency-Key": str(_uuid.uuid4())}
    assert http.delete(f"/v1/namespaces/{ns}/tables/once", headers=drop_key).status_code == 204
    assert http.delete(f"/v1/namespaces/{ns}/tables/once", headers=drop_key).status_code == 204
    assert_error(http.delete(f"/v1/namespaces/{ns}/tables/once"), 404, "NoSuchTableException", spec)

    assert_error(
        http.delete(f"/v1/namespaces/{ns}/tables/other", headers=drop_key),
        422,
        "UnprocessableEntityException",
        spec,
    )
    assert_error(
        http.post("/v1/namespaces", json={"namespace": ["x"]}, headers={"Idempotency-Key": "nope"}),
        400,
        "BadRequestException",
        spec,
    )
    assert http.get("/v1/config").json()["idempotency-key-lifetime"] == "PT30M"


def test_creating_tables_inside_a_transaction_is_unsupported(http, ns, spec) -> None:
    change = {
        "identifier": {"namespace": [ns], "name": "fresh"},
        "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "assign-uuid", "uuid": "00000000-0000-0000-0000-000000000001"}],
    }
    response = http.post("/v1/transactions/commit", json={"table-changes": [change]})
    assert_error(response, 406, "UnsupportedOperationException", spec)
    assert http.head(f"/v1/namespaces/{ns}/tables/fresh").status_code == 404
