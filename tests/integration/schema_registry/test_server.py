"""The registry as a server: concurrency, restarts, bad input, content types."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.integration.schema_registry.conftest import RunningRegistry, sqlite_settings

SR = "application/vnd.schemaregistry.v1+json"


def record(name: str, n: int = 1) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [{"name": f"f{i}", "type": "int", "default": 0} for i in range(n)],
        }
    )


def test_concurrent_registrations_of_one_schema_get_one_id_and_version(
    registry: RunningRegistry,
) -> None:
    body = {"schema": record("Concurrent")}

    def post(_: int) -> dict[str, int]:
        with httpx.Client(base_url=registry.url, timeout=30) as c:
            r = c.post("/subjects/concurrent/versions", json=body, headers={"Content-Type": SR})
            assert r.status_code == 200, r.text
            return dict(r.json())

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(post, range(64)))
    assert {(r["id"], r["version"]) for r in results} == {(results[0]["id"], 1)}


def test_concurrent_distinct_schemas_get_distinct_ids(registry: RunningRegistry) -> None:
    def post(i: int) -> int:
        with httpx.Client(base_url=registry.url, timeout=30) as c:
            r = c.post(f"/subjects/distinct-{i}/versions", json={"schema": record(f"D{i}")})
            assert r.status_code == 200, r.text
            return int(r.json()["id"])

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(post, range(40)))
    assert len(set(ids)) == 40


def test_registry_state_survives_a_restart(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path / "schemas.db")
    with RunningRegistry(settings) as first:
        r = httpx.post(f"{first.url}/subjects/durable/versions", json={"schema": record("Durable")})
        sid = r.json()["id"]
        httpx.put(f"{first.url}/config/durable", json={"compatibility": "FULL"})
        httpx.delete(f"{first.url}/subjects/durable/versions/1")
    with RunningRegistry(settings) as second:
        assert httpx.get(f"{second.url}/schemas/ids/{sid}").status_code == 200
        assert httpx.get(f"{second.url}/config/durable").json() == {"compatibilityLevel": "FULL"}
        assert httpx.get(f"{second.url}/subjects/durable/versions?deleted=true").json() == [1]
        again = httpx.post(
            f"{second.url}/subjects/other/versions", json={"schema": record("Other")}
        )
        assert again.json()["id"] == sid + 1


def test_bad_input_over_the_wire_and_the_registry_keeps_serving(registry: RunningRegistry) -> None:
    with httpx.Client(base_url=registry.url, timeout=30) as c:
        cases = [
            (
                c.post("/subjects/bad/versions", content=b"{nope", headers={"Content-Type": SR}),
                400,
                400,
            ),
            (c.post("/subjects/bad/versions", json={"schema": '{"type": "nope"}'}), 422, 42201),
            (c.put("/config", json={"compatibility": "MAYBE"}), 422, 42203),
            (c.put("/mode", json={"mode": "SOMETIMES"}), 422, 42204),
            (c.get("/subjects/never/versions"), 404, 40401),
            (c.get("/schemas/ids/999999"), 404, 40403),
            (c.post("/subjects/bad/versions", content=b"x" * (2 * 1024 * 1024)), 413, 413),
        ]
        for response, status, code in cases:
            assert response.status_code == status, response.text
            assert response.json()["error_code"] == code
            assert response.headers["content-type"] == SR
        c.post("/subjects/fine/versions", json={"schema": record("Fine")})
        c.post(
            "/subjects/fine/versions",
            json={
                "schema": json.dumps(
                    {"type": "record", "name": "Fine", "fields": [{"name": "x", "type": "int"}]}
                )
            },
        )
        assert c.get("/subjects/fine/versions/9").json()["error_code"] == 40402
        assert c.get("/subjects").status_code == 200
