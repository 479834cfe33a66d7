"""The Iceberg REST catalog against the official Iceberg REST OpenAPI spec, through schemathesis.

The spec is read from ``<repo>/../shared/specs/iceberg-rest-catalog-open-api.yaml``
(never copied into the repository). Its routes carry an optional ``{prefix}``
that the catalog does not use (``/v1/config`` advertises no prefix), so the
in-memory copy drops that path segment. For every operation the catalog
serves, generated requests (valid and invalid) must never get a 5xx, and the
answer must match the spec's response schema for its status. Operations the
catalog deliberately does not serve (views, scan planning, credentials,
signing) are left out of the generation and checked to answer the spec's
error body instead.

The catalog runs in process (ASGI) on the embedded SQL catalog, seeded with a
namespace and a table whose names the generated paths use half of the time,
so requests reach real tables and not only 404s. Bounded for CI: a fixed
number of examples per operation, a fixed seed, no example database;
``TIDELAKE_FUZZ_SCALE`` multiplies the example count for a longer hunt.
"""

from __future__ import annotations

import atexit
import copy
import itertools
import os
import shutil
import tempfile
import uuid
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

schemathesis = pytest.importorskip("schemathesis")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, seed, settings  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

from catalog.app import create_app  # noqa: E402
from catalog.rest.router import ENDPOINTS  # noqa: E402

SPEC_PATH = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "specs"
    / "iceberg-rest-catalog-open-api.yaml"
)
if not SPEC_PATH.exists():
    raise RuntimeError(f"the Iceberg REST spec is not at {SPEC_PATH} (../shared/specs)")

# schemathesis gives every operation's item one node id, which pytest-xdist takes for a
# single test: this module runs in the test command's single-process phase
pytestmark = pytest.mark.one_process

_SCALE = max(1, int(os.environ.get("TIDELAKE_FUZZ_SCALE", "1")))
SEED_NAMESPACE = "fuzz"
SEED_TABLE = "t"
# Served besides the advertised endpoints (the deprecated OAuth2 token route).
_ALSO_SERVED = {("GET", "/v1/config"), ("POST", "/v1/oauth/tokens")}


def _served() -> set[tuple[str, str]]:
    served = {(e.split(" ", 1)[0], e.split(" ", 1)[1].replace("/{prefix}", "")) for e in ENDPOINTS}
    return served | _ALSO_SERVED


def _spec_without_prefix() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    spec = copy.deepcopy(spec)
    spec.pop("servers", None)
    paths: dict[str, Any] = {}
    for path, item in spec["paths"].items():
        new_path = path.replace("/v1/{prefix}/", "/v1/")
        item = dict(item)
        for key in ("parameters",):
            if key in item:
                item[key] = [
                    p for p in item[key] if p.get("$ref") != "#/components/parameters/prefix"
                ]
        paths[new_path] = item
    spec["paths"] = paths
    return spec


SPEC = _spec_without_prefix()
_METHODS = ("get", "post", "put", "delete", "head", "patch")
UNSERVED = sorted(
    (method.upper(), path)
    for path, item in SPEC["paths"].items()
    for method in _METHODS
    if method in item and (method.upper(), path) not in _served()
)


def _create_seed_table(backing: SqlCatalog) -> None:
    table = backing.create_table(
        (SEED_NAMESPACE, SEED_TABLE), pa.schema([("id", pa.int64()), ("name", pa.string())])
    )
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}))


def _backing() -> SqlCatalog:
    data = Path(tempfile.mkdtemp(prefix="tidelake-catalog-fuzz-"))
    # built at import (schemathesis needs the app then): removed at exit
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    return SqlCatalog(
        "fuzz", uri=f"sqlite:///{data / 'catalog.db'}", warehouse=(data / "wh").as_uri()
    )


BACKING = _backing()
BACKING.create_namespace(SEED_NAMESPACE)
_create_seed_table(BACKING)
APP = create_app(catalog=BACKING)
SCHEMA = schemathesis.openapi.from_dict(SPEC)
SCHEMA.app = APP
SCHEMA = SCHEMA.exclude(
    func=lambda ctx: (ctx.operation.method.upper(), ctx.operation.path) in UNSERVED
)
CHECKS = [not_a_server_error, response_schema_conformance]


_KEYS = itertools.count()


def _prepare(case: Any) -> None:
    """Steer a generated case before it is sent (in the test, so every phase gets it).

    - Half of the paths (chosen by a hash of the generated values, so runs
      repeat) name the seeded namespace and table, so requests reach a table.
    - A fresh Idempotency-Key per request: generated keys repeat, and a
      repeated key replays the first answer (or is a 422), hiding the
      operation under test. Replays have their own integration test.
    """
    params = case.path_parameters
    if params and zlib.crc32(repr(sorted(params.items())).encode()) % 2 == 0:
        if "namespace" in params:
            params["namespace"] = SEED_NAMESPACE
        if "table" in params:
            params["table"] = SEED_TABLE
    headers = case.headers
    if headers:
        for name in list(headers):
            if name.lower() == "idempotency-key":
                headers[name] = str(uuid.UUID(int=next(_KEYS)))


def _ensure_seed() -> None:
    """Generated requests may drop the seeded table or rename it: put it back."""
    if not BACKING.table_exists((SEED_NAMESPACE, SEED_TABLE)):
        if not BACKING.namespace_exists(SEED_NAMESPACE):
            BACKING.create_namespace(SEED_NAMESPACE)
        _create_seed_table(BACKING)


@SCHEMA.parametrize()
@seed(20261125)
@settings(
    max_examples=30 * _SCALE,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_catalog_answers_every_generated_request_per_the_spec(case: Any) -> None:
    _ensure_seed()
    _prepare(case)
    case.call_and_validate(checks=CHECKS)


@pytest.mark.parametrize(("method", "path"), UNSERVED)
def test_operations_the_catalog_does_not_serve_answer_the_spec_error(
    method: str, path: str
) -> None:
    concrete = (
        path.replace("{namespace}", SEED_NAMESPACE)
        .replace("{table}", SEED_TABLE)
        .replace("{view}", "v")
        .replace("{plan-id}", "p")
    )
    response = TestClient(APP).request(method, concrete, json={})
    assert response.status_code in (404, 405, 406), (method, path, response.status_code)
    if method != "HEAD":
        error = response.json()["error"]
        assert error["code"] == response.status_code and error["type"] and error["message"]
