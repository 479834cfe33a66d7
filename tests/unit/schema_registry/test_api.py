"""The REST API over HTTP semantics (TestClient): payloads, status codes and Confluent error codes."""

from __future__ import annotations

import json
from collections.abc import Iterator

from fastapi.testclient import TestClient

from tests.unit.schema_registry.conftest import avro_record

V1 = avro_record("User", {"name": "id", "type": "long"})
V2 = avro_record(
    "User",
    {"name": "id", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
)
BAD = avro_record("User", {"name": "id", "type": "long"}, {"name": "age", "type": "int"})


def register(client: TestClient, subject: str, schema: str, **extra: object) -> dict[str, object]:
    r = client.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})
    assert r.status_code == 200, r.text
    body = dict(r.json())
    assert isinstance(body.pop("guid"), str)
    return body


def error(response: object, status: int, code: int) -> None:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["error_code"] == code
    assert isinstance(body["message"], str)


def test_register_returns_the_same_id_and_version_for_the_same_schema(client: TestClient) -> None:
    first = register(client, "users-value", V1)
    spaced = json.dumps(json.loads(V1), indent=4)
    assert register(client, "users-value", spaced) == first == {"id": 1, "version": 1}


def test_same_schema_under_two_subjects_shares_the_global_id(client: TestClient) -> None:
    a = register(client, "a-value", V1)
    b = register(client, "b-value", V1)
    assert a["id"] == b["id"] and b["version"] == 1
    assert client.get(f"/schemas/ids/{a['id']}/subjects").json() == ["a-value", "b-value"]
    assert client.get(f"/schemas/ids/{a['id']}/versions").json() == [
        {"subject": "a-value", "version": 1},
        {"subject": "b-value", "version": 1},
    ]


def test_responses_use_the_schema_registry_content_type(client: TestClient) -> None:
    r = client.get("/subjects", headers={"Accept": "application/vnd.schemaregistry.v1+json"})
    assert r.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    for content_type in (
        "application/vnd.schemaregistry.v1+json",
        "application/vnd.schemaregistry+json",
        "application/json",
    ):
        r = client.post(
            "/subjects/ct/versions",
            content=json.dumps({"schema": V1}),
            headers={"Content-Type": content_type},
        )
        assert r.status_code == 200


def test_get_schema_by_id_and_raw_schema(client: TestClient) -> None:
    sid = register(client, "s", V1)["id"]
    body = client.get(f"/schemas/ids/{sid}").json()
    assert json.loads(body["schema"]) == json.loads(V1)
    assert "schemaType" not in body  # AVRO is implied, as in Confluent
    raw = client.get(f"/schemas/ids/{sid}/schema")
    assert json.loads(raw.text) == json.loads(V1)
    assert client.get(f"/schemas/ids/{sid}?subject=s&format=resolved").status_code == 200


def test_schema_guids_are_content_derived_and_resolvable(client: TestClient) -> None:
    r = client.post("/subjects/g/versions", json={"schema": V1}).json()
    got = client.get(f"/schemas/guids/{r['guid']}").json()
    assert got["id"] == r["id"] and got["guid"] == r["guid"]
    assert json.loads(got["schema"]) == json.loads(V1)
    assert client.get(f"/schemas/ids/{r['id']}").json()["guid"] == r["guid"]
    same = client.post("/subjects/other/versions", json={"schema": V1}).json()
    assert same["guid"] == r["guid"]
    error(client.get("/schemas/guids/00000000-0000-0000-0000-000000000000"), 404, 40403)
    error(client.get("/schemas/guids/not-a-guid"), 404, 40403)


def test_schema_types_lists_all_three(client: TestClient) -> None:
    assert sorted(client.get("/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]


def test_versions_latest_and_schema_endpoints(client: TestClient) -> None:
    register(client, "s", V1)
    register(client, "s", V2)
    assert client.get("/subjects/s/versions").json() == [1, 2]
    latest = client.get("/subjects/s/versions/latest").json()
    assert latest["version"] == 2 and latest["subject"] == "s" and latest["id"] == 2
    assert client.get("/subjects/s/versions/-1").json() == latest
    assert json.loads(client.get("/subjects/s/versions/1/schema").text) == json.loads(V1)
    listing = client.get("/schemas").json()
    assert [(s["subject"], s["version"]) for s in listing] == [("s", 1), ("s", 2)]
    assert len(client.get("/schemas?latestOnly=true").json()) == 1


def test_lookup_finds_subject_version_and_normalize(client: TestClient) -> None:
    register(client, "s", V1)
    r = client.post("/subjects/s", json={"schema": V1})
    assert r.status_code == 200 and r.json()["version"] == 1 and r.json()["id"] == 1
    # key order and layout do not matter: Avro schemas are compared in canonical form
    reordered = json.dumps(
        {"name": "User", "fields": [{"type": "long", "name": "id"}], "type": "record"}
    )
    assert client.post("/subjects/s", json={"schema": reordered}).json()["id"] == 1
    # the order of custom properties only matters without normalize
    first = json.dumps({"type": "record", "name": "P", "fields": [], "x-a": 1, "x-b": 2})
    second = json.dumps({"type": "record", "name": "P", "fields": [], "x-b": 2, "x-a": 1})
    assert (
        client.post("/subjects/props/versions?normalize=true", json={"schema": first}).status_code
        == 200
    )
    error(client.post("/subjects/props", json={"schema": second}), 404, 40403)
    assert client.post("/subjects/props?normalize=true", json={"schema": second}).status_code == 200
    error(client.post("/subjects/nope", json={"schema": V1}), 404, 40401)


def test_incompatible_schema_is_409_and_registry_keeps_serving(client: TestClient) -> None:
    register(client, "s", V1)
    error(client.post("/subjects/s/versions", json={"schema": BAD}), 409, 409)
    assert client.get("/subjects/s/versions").json() == [1]
    register(client, "s", V2)


def test_compatibility_endpoint_with_verbose_and_all_versions(client: TestClient) -> None:
    register(client, "s", V1)
    ok = client.post("/compatibility/subjects/s/versions/latest", json={"schema": V2})
    assert ok.json() == {"is_compatible": True}
    bad = client.post("/compatibility/subjects/s/versions/1?verbose=true", json={"schema": BAD})
    assert bad.json()["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in bad.json()["messages"])
    every = client.post("/compatibility/subjects/s/versions?verbose=true", json={"schema": V2})
    assert every.json() == {"is_compatible": True, "messages": []}
    error(client.post("/compatibility/subjects/s/versions/7", json={"schema": V2}), 404, 40402)
    error(client.post("/compatibility/subjects/none/versions/1", json={"schema": V2}), 404, 40401)


def test_config_global_and_subject_with_default_to_global(client: TestClient) -> None:
    assert client.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert client.put("/config", json={"compatibility": "FULL"}).json() == {"compatibility": "FULL"}
    assert client.get("/config").json()["compatibilityLevel"] == "FULL"
    error(client.get("/config/s"), 404, 40408)
    assert client.get("/config/s?defaultToGlobal=true").json()["compatibilityLevel"] == "FULL"
    client.put("/config/s", json={"compatibility": "none"})
    assert client.get("/config/s").json()["compatibilityLevel"] == "NONE"
    assert client.delete("/config/s").json()["compatibilityLevel"] == "NONE"
    error(client.get("/config/s"), 404, 40408)
    assert client.delete("/config").json()["compatibilityLevel"] == "FULL"
    assert client.get("/config").json()["compatibilityLevel"] == "BACKWARD"


def test_subject_level_none_allows_any_change(client: TestClient) -> None:
    register(client, "s", V1)
    client.put("/config/s", json={"compatibility": "NONE"})
    assert register(client, "s", BAD)["version"] == 2


def test_invalid_compatibility_level_is_42203(client: TestClient) -> None:
    error(client.put("/config", json={"compatibility": "SIDEWAYS"}), 422, 42203)
    error(client.put("/config/s", json={"compatibility": 3}), 422, 42203)


def test_invalid_schema_is_42201(client: TestClient) -> None:
    error(client.post("/subjects/s/versions", json={"schema": "{not json"}), 422, 42201)
    error(client.post("/subjects/s/versions", json={"schema": '{"type":"recurd"}'}), 422, 42201)
    error(client.post("/subjects/s/versions", json={"schema": ""}), 422, 42201)
    error(client.post("/subjects/s/versions", json={"schema": V1, "schemaType": "XML"}), 422, 42201)
    error(client.post("/subjects/s/versions", json={"nothing": 1}), 422, 42201)
    for bad_avro in (
        '{"type":"record","name":"a-b","fields":[]}',
        '{"type":"record","name":"R"}',
        '{"type":"record","name":"R","fields":[{"name":"x","type":"int"},{"name":"x","type":"long"}]}',
        '["int","int"]',
        '{"type":"enum","name":"E","symbols":["ok","not ok"]}',
    ):
        error(client.post("/subjects/s/versions", json={"schema": bad_avro}), 422, 42201)
    error(
        client.post("/subjects/s/versions", json={"schema": '{"type": 12}', "schemaType": "JSON"}),
        422,
        42201,
    )
    error(
        client.post("/subjects/s/versions", json={"schema": "message {", "schemaType": "PROTOBUF"}),
        422,
        42201,
    )


def test_malformed_json_body_is_400_and_unknown_route_404(client: TestClient) -> None:
    error(client.post("/subjects/s/versions", content=b"{oops"), 400, 400)
    error(client.get("/no/such/route"), 404, 404)
    error(client.get("/schemas/ids/not-a-number"), 404, 404)
    error(client.put("/schemas/types"), 405, 405)


def test_oversize_body_is_refused_with_413(client: TestClient) -> None:
    huge = avro_record("Big", *({"name": f"f{i}", "type": "string"} for i in range(5000)))
    error(client.post("/subjects/s/versions", json={"schema": huge}), 413, 413)
    assert client.get("/subjects").status_code == 200


def test_unknown_subject_version_and_schema_errors(client: TestClient) -> None:
    error(client.get("/subjects/none/versions"), 404, 40401)
    error(client.get("/subjects/none/versions/1"), 404, 40401)
    register(client, "s", V1)
    error(client.get("/subjects/s/versions/2"), 404, 40402)
    error(client.get("/subjects/s/versions/0"), 422, 42202)
    error(client.get("/subjects/s/versions/latestish"), 422, 42202)
    error(client.get("/subjects/s/versions/2147483648"), 422, 42202)
    error(client.get("/schemas/ids/99"), 404, 40403)
    error(client.get("/schemas/ids/99/subjects"), 404, 40403)


def test_soft_delete_then_permanent_delete_rules(client: TestClient) -> None:
    sid = register(client, "s", V1)["id"]
    register(client, "s", V2)
    error(client.delete("/subjects/s?permanent=true"), 404, 40405)
    error(client.delete("/subjects/s/versions/1?permanent=true"), 404, 40407)
    assert client.delete("/subjects/s/versions/1").json() == 1
    error(client.delete("/subjects/s/versions/1"), 404, 40406)
    error(client.get("/subjects/s/versions/1"), 404, 40402)
    assert client.get("/subjects/s/versions/1?deleted=true").json()["id"] == sid
    assert client.get("/subjects/s/versions").json() == [2]
    assert client.get("/subjects/s/versions?deleted=true").json() == [1, 2]
    assert client.delete("/subjects/s").json() == [2]
    error(client.delete("/subjects/s"), 404, 40404)
    error(client.get("/subjects/s/versions"), 404, 40401)
    assert client.get("/subjects").json() == []
    assert client.get("/subjects?deleted=true").json() == ["s"]
    assert client.get("/subjects?deletedOnly=true").json() == ["s"]
    # soft-deleted ids stay resolvable
    assert client.get(f"/schemas/ids/{sid}").status_code == 200
    assert client.get(f"/schemas/ids/{sid}/subjects").json() == []
    assert client.get(f"/schemas/ids/{sid}/subjects?deleted=true").json() == ["s"]
    assert client.delete("/subjects/s?permanent=true").json() == [1, 2]
    error(client.get(f"/schemas/ids/{sid}"), 404, 40403)
    error(client.delete("/subjects/s"), 404, 40401)


def test_ids_are_never_reused_and_versions_continue_after_soft_delete(client: TestClient) -> None:
    first = register(client, "s", V1)
    client.delete("/subjects/s/versions/1")
    again = register(client, "s", V1)
    assert again == {"id": first["id"], "version": 2}
    other = register(client, "t", V2)
    client.delete("/subjects/t")
    client.delete("/subjects/t?permanent=true")
    fresh = register(client, "u", avro_record("Other", {"name": "x", "type": "int"}))
    assert fresh["id"] > other["id"]


def test_mode_readonly_blocks_writes_and_import_takes_explicit_ids(client: TestClient) -> None:
    assert client.get("/mode").json() == {"mode": "READWRITE"}
    error(client.get("/mode/s"), 404, 40409)
    assert client.get("/mode/s?defaultToGlobal=true").json() == {"mode": "READWRITE"}
    error(client.put("/mode", json={"mode": "WRITEONLY"}), 422, 42204)
    client.put("/mode/s", json={"mode": "READONLY"})
    error(client.post("/subjects/s/versions", json={"schema": V1}), 422, 42205)
    assert client.delete("/mode/s").json() == {"mode": "READONLY"}
    register(client, "other", V1)
    error(client.put("/mode", json={"mode": "IMPORT"}), 422, 42205)
    assert client.put("/mode/imp", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    assert register(client, "imp", V2, id=100, version=5) == {"id": 100, "version": 5}
    error(client.post("/subjects/imp/versions", json={"schema": BAD, "id": 100}), 422, 42207)
    client.put("/mode/imp", json={"mode": "READWRITE"})
    assert register(client, "next", BAD)["id"] == 101
    error(client.post("/subjects/x/versions", json={"schema": BAD, "id": 7}), 422, 42205)
    client.put("/mode?force=true", json={"mode": "READONLY_OVERRIDE"})
    client.put("/mode/imp", json={"mode": "READWRITE"})
    error(client.post("/subjects/imp/versions", json={"schema": V1}), 422, 42205)
    error(client.delete("/subjects/imp"), 422, 42205)


def test_references_resolve_and_block_deletion(client: TestClient) -> None:
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "com.acme",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    register(client, "address", address)
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "com.acme",
            "fields": [{"name": "home", "type": "com.acme.Address"}],
        }
    )
    refs = [{"name": "com.acme.Address", "subject": "address", "version": 1}]
    pid = register(client, "person", person, references=refs)["id"]
    got = client.get(f"/schemas/ids/{pid}").json()
    assert got["references"] == refs
    assert client.get("/subjects/address/versions/1/referencedby").json() == [pid]
    error(client.delete("/subjects/address/versions/1"), 422, 42206)
    error(client.delete("/subjects/address"), 422, 42206)
    missing = [{"name": "com.acme.Address", "subject": "address", "version": 9}]
    error(
        client.post("/subjects/p2/versions", json={"schema": person, "references": missing}),
        422,
        42201,
    )
    error(client.post("/subjects/p2/versions", json={"schema": person}), 422, 42201)


def test_invalid_subject_is_42208(client: TestClient) -> None:
    error(client.post("/subjects/bad%01name/versions", json={"schema": V1}), 422, 42208)


def test_contexts_and_context_qualified_subjects(client: TestClient) -> None:
    assert client.get("/contexts").json() == ["."]
    register(client, ":.staging:orders-value", V1)
    assert client.get("/subjects?subjectPrefix=:.staging:").json() == [":.staging:orders-value"]
    assert client.get("/contexts").json() == [".", ".staging"]


def test_each_context_has_its_own_id_space(client: TestClient) -> None:
    other = avro_record("Other", {"name": "x", "type": "int"})
    assert register(client, "a-value", other)["id"] == 1
    default_id = register(client, "users-value", V1)["id"]
    staged = register(client, ":.staging:users-value", V1)
    assert staged == {"id": 1, "version": 1}
    assert default_id != 1
    by_ctx = client.get("/schemas/ids/1?subject=:.staging:users-value").json()
    assert json.loads(by_ctx["schema"]) == json.loads(V1)
    plain = client.get("/schemas/ids/1").json()
    assert json.loads(plain["schema"]) == json.loads(other)
    assert client.get("/schemas/ids/1/subjects?subject=:.staging:x").json() == [
        ":.staging:users-value"
    ]
    error(client.get(f"/schemas/ids/{default_id}?subject=:.staging:users-value"), 404, 40403)
    latest = client.get("/subjects/:.staging:users-value/versions/latest").json()
    assert latest["id"] == 1 and json.loads(latest["schema"]) == json.loads(V1)


def test_context_level_config_applies_to_its_subjects(client: TestClient) -> None:
    register(client, ":.staging:s", V1)
    client.put("/config/:.staging:", json={"compatibility": "NONE"})
    assert register(client, ":.staging:s", BAD)["version"] == 2
    register(client, "s", V1)
    error(client.post("/subjects/s/versions", json={"schema": BAD}), 409, 409)


def test_avro_defaults_must_match_their_type(client: TestClient) -> None:
    for field in (
        {"name": "n", "type": "int", "default": "zero"},
        {"name": "u", "type": ["null", "string"], "default": "x"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}, "default": "B"},
        {"name": "a", "type": {"type": "array", "items": "long"}, "default": [1, "2"]},
    ):
        r = client.post("/subjects/defaults/versions", json={"schema": avro_record("D", field)})
        error(r, 422, 42201)
    ok = avro_record(
        "D",
        {"name": "u", "type": ["string", "null"], "default": "x"},
        {"name": "d", "type": "double", "default": 1},
        {"name": "m", "type": {"type": "map", "values": "int"}, "default": {"a": 1}},
        {"name": "b", "type": "bytes", "default": "\\u00ff"},
    )
    register(client, "defaults", ok)


def test_root_answers_empty_object(client: TestClient) -> None:
    assert client.get("/").json() == {}
    assert "schema-registry-cluster" in client.get("/v1/metadata/id").json()["scope"]["clusters"]
    assert client.get("/v1/metadata/version").json()["version"]


def test_deeply_nested_input_is_refused_and_the_registry_keeps_serving(client: TestClient) -> None:
    deep_body = b'{"schema": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = client.post("/subjects/deep/versions", content=deep_body)
    assert r.status_code in (400, 413)
    nested: str = '"int"'
    for _ in range(1500):
        nested = f'{{"type":"array","items":{nested}}}'
    r = client.post("/subjects/deep/versions", json={"schema": nested, "schemaType": "JSON"})
    assert r.status_code == 422 and r.json()["error_code"] == 42201
    assert client.get("/subjects").status_code == 200


def test_oversize_chunked_body_without_length_is_refused(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"schema": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    r = client.post("/subjects/s/versions", content=chunks())
    assert "content-length" not in r.request.headers
    error(r, 413, 413)
    assert client.get("/subjects").status_code == 200


def test_contexts_url_prefix_scopes_the_whole_api(client: TestClient) -> None:
    base = "/contexts/.team"
    r = client.post(f"{base}/subjects/orders-value/versions", json={"schema": V1})
    assert r.json()["id"] == 1 and r.json()["version"] == 1
    assert client.get("/subjects").json() == [":.team:orders-value"]
    assert client.get(f"{base}/subjects").json() == [":.team:orders-value"]
    assert client.get(f"{base}/subjects/orders-value/versions").json() == [1]
    assert client.get(f"{base}/subjects/orders-value/versions/latest").json()["id"] == 1
    assert client.get(f"{base}/schemas/ids/1").status_code == 200
    error(client.get("/schemas/ids/1"), 404, 40403)  # nothing in the default context yet
    assert client.put(f"{base}/config", json={"compatibility": "NONE"}).status_code == 200
    assert client.get("/config/:.team:").json() == {"compatibilityLevel": "NONE"}
    r = client.post(
        f"{base}/compatibility/subjects/orders-value/versions/latest", json={"schema": BAD}
    )
    assert r.json() == {"is_compatible": True}
    assert client.get(f"{base}/schemas/types").status_code == 200
    assert len(client.get(f"{base}/schemas").json()) == 1


def test_metadata_and_rule_set_make_a_new_version_and_are_inherited(client: TestClient) -> None:
    meta = {"properties": {"owner": "team-a"}}
    first = register(client, "dc", V1, metadata=meta)
    body = client.get("/subjects/dc/versions/1").json()
    assert body["metadata"] == meta and "ruleSet" not in body
    # same schema, no metadata: inherits the latest version's, so nothing new is registered
    assert register(client, "dc", V1) == first
    other = {"properties": {"owner": "team-b"}}
    second = register(client, "dc", V1, metadata=other)
    assert second["version"] == 2 and second["id"] != first["id"]
    assert client.get("/subjects/dc/metadata?key=owner&value=team-a").json()["version"] == 1
    assert client.post("/subjects/dc", json={"schema": V1}).json()["version"] == 2
    error(client.post("/subjects/dc/versions", json={"schema": V1, "metadata": [1]}), 422, 42201)
    error(client.get("/subjects/dc/metadata?key=owner&value=nobody"), 404, 40403)
