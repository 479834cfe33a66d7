"""A throwaway PostgreSQL database per test (the server at 127.0.0.1:5432, trust auth)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

SERVER = "postgresql://postgres@127.0.0.1:5432"


def _admin() -> Any:
    import psycopg2

    try:
        conn = psycopg2.connect(f"{SERVER}/postgres", connect_timeout=3)
    except psycopg2.OperationalError as exc:  # pragma: no cover - no server here
        # every development and CI machine runs one: a skip would pass for nothing
        pytest.fail(f"PostgreSQL not reachable on 127.0.0.1:5432 (trust auth expected): {exc}")
    conn.autocommit = True
    return conn


@contextmanager
def temporary_database(prefix: str = "tl_test") -> Iterator[str]:
    """Create a database with a unique name, yield its URL, drop it afterwards
    (closing any connection a test left open)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conn = _admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield f"{SERVER}/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture
def pg_database() -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    with temporary_database() as url:
        yield url
