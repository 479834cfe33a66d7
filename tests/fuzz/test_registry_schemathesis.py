"""The schema registry against its own /openapi.json, through schemathesis (in-process ASGI).

For every documented operation, generated requests (valid and invalid) must never get a
5xx, and every answer must be documented: its status, its content type and its body
(Confluent's ``{"error_code", "message"}`` for errors). The registry runs on the SQLite store
(the embedded default) and on PostgreSQL (the cluster store; skipped when no server answers
on 127.0.0.1:5432), so values either database refuses are found too. Bounded for CI: a fixed
number of examples per operation, a fixed seed, no example database. 15 examples per
operation on each store: about 40 s of CPU, 60-80 s on two busy cores.
``TIDELAKE_FUZZ_SCALE`` multiplies the example count for a longer hunt.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from schema_registry.app import RegistrySettings, create_app
from schema_registry.service import RegistryService
from schema_registry.store import open_store

# schemathesis gives every operation's item one node id, which pytest-xdist takes for a
# single test: this module runs in the test command's single-process phase
pytestmark = pytest.mark.one_process

_SCALE = max(1, int(os.environ.get("TIDELAKE_FUZZ_SCALE", "1")))
_PG_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def _sqlite_url() -> str:
    data = Path(tempfile.mkdtemp(prefix="tidelake-registry-fuzz-"))
    atexit.register(shutil.rmtree, data, True)
    return f"sqlite:///{data / 'registry.db'}"


def _postgres_url() -> str | None:
    """A fresh PostgreSQL schema (dropped at exit), or None when no server is reachable."""
    try:
        import psycopg2

        conn = psycopg2.connect(_PG_SERVER, connect_timeout=3)
    except Exception:  # noqa: BLE001 - no driver or no server: the PostgreSQL run is skipped
        return None
    conn.autocommit = True
    name = f"sr_fuzz_{uuid.uuid4().hex[:10]}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {name}")

    def drop() -> None:
        with conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA {name} CASCADE")
        conn.close()

    atexit.register(drop)
    return f"{_PG_SERVER}?schema={name}"


def _registry(url: str | None) -> tuple[Any, RegistryService | None]:
    """The app over a store the test owns (schemathesis's ASGI client runs the app's lifespan
    once per call, and an app that owns its store closes it at shutdown)."""
    if url is None:
        return create_app(RegistrySettings(store_url="memory://")), None
    store = open_store(url)
    atexit.register(store.close)
    app = create_app(RegistrySettings(store_url="memory://"), store=store)
    return app, app.state.registry


SQLITE_APP, SQLITE = _registry(_sqlite_url())
PG_URL = _postgres_url()
PG_APP, POSTGRES = _registry(PG_URL)
SQLITE_SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", SQLITE_APP)
PG_SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", PG_APP)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    unsupported_method,
]
# A subject may contain "/", so POST /subjects/s/metadata is a lookup of subject "s/metadata"
# (and DELETE /subjects/s/metadata deletes it), not a method the metadata route lacks.
SUBJECT_CHECKS = [check for check in CHECKS if check is not unsupported_method]


FUZZ = settings(
    max_examples=15 * _SCALE,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _call(case: Case, service: RegistryService) -> None:
    # A generated PUT /mode READONLY would turn every later write into 42205: the mode
    # operations are fuzzed too, but the others run against a writable registry.
    if not case.path.startswith("/mode") and service.get_mode(None) != "READWRITE":
        service.delete_mode(None)
    nested = case.operation.path.startswith("/subjects/{subject}/")
    case.call_and_validate(checks=SUBJECT_CHECKS if nested else CHECKS)


@SQLITE_SCHEMA.parametrize()
@seed(20240514)
@FUZZ
def test_registry_on_sqlite_answers_every_generated_request_as_documented(case: Case) -> None:
    assert SQLITE is not None
    _call(case, SQLITE)


@PG_SCHEMA.parametrize()
@seed(20240514)
@FUZZ
def test_registry_on_postgres_answers_every_generated_request_as_documented(case: Case) -> None:
    if POSTGRES is None:
        pytest.fail(f"PostgreSQL not reachable at {_PG_SERVER}")
    _call(case, POSTGRES)
