"""The catalog app in process: error bodies stay inside the catalog's own paths."""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException
from fastapi.testclient import TestClient

from catalog.app import create_app
from catalog.config import CatalogSettings


def test_routes_added_by_others_keep_fastapi_errors(tmp_path: Path) -> None:
    app = create_app(CatalogSettings(data_dir=tmp_path))

    @app.get("/api/v1/broker/{name}")
    def broker(name: int) -> dict[str, int]:
        raise HTTPException(404, "no such broker")

    client = TestClient(app)
    assert client.get("/api/v1/broker/1").json() == {"detail": "no such broker"}
    assert client.get("/api/v1/broker/x").status_code == 422
    assert client.get("/elsewhere").json() == {"detail": "Not Found"}
    body = client.get("/v1/unknown").json()
    assert body["error"]["code"] == 404 and body["error"]["type"] == "NotFoundException"
    body = client.get("/api/v1/catalog/nothing").json()
    assert body["error"]["code"] == 404


def test_ui_page_is_served(tmp_path: Path) -> None:
    client = TestClient(create_app(CatalogSettings(data_dir=tmp_path)))
    page = client.get("/ui/")
    assert page.status_code == 200 and "Tidelake catalog" in page.text
    assert client.get("/ui", follow_redirects=False).headers["location"] == "ui/"


def test_catalog_opens_lazily_on_first_request(tmp_path: Path) -> None:
    app = create_app(CatalogSettings(data_dir=tmp_path / "state"))
    assert not (tmp_path / "state" / "catalog.db").exists()
    client = TestClient(app)
    assert client.post("/v1/namespaces", json={"namespace": ["a"]}).status_code == 200
    assert (tmp_path / "state" / "catalog.db").exists()


def test_every_advertised_endpoint_is_served_and_in_the_spec(tmp_path: Path) -> None:
    from catalog.rest.router import ENDPOINTS

    app = create_app(CatalogSettings(data_dir=tmp_path))
    served = {
        (method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops
    }
    spec_path = (
        Path(__file__).resolve().parents[3].parent
        / "shared/specs/iceberg-rest-catalog-open-api.yaml"
    )
    spec_paths: dict[str, object] = {}
    if spec_path.exists():
        import yaml

        spec_paths = yaml.safe_load(spec_path.read_text())["paths"]
    for endpoint in ENDPOINTS:
        method, path = endpoint.split(" ", 1)
        assert (method, path.replace("/{prefix}", "")) in served, endpoint
        if spec_paths:
            assert method.lower() in spec_paths[path], endpoint  # type: ignore[operator]
