"""Real catalog backends for tests: SQLite, PostgreSQL, Glue on moto's server, Tidelake's REST."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.integration.catalog.conftest import free_port

PG_DSN = os.environ.get("TIDELAKE_TEST_PG", "postgresql+psycopg2://postgres@127.0.0.1:5432")


def postgres_available() -> bool:
    try:
        import psycopg2

        psycopg2.connect(
            host="127.0.0.1", port=5432, user="postgres", dbname="postgres", connect_timeout=2
        ).close()
        return True
    except Exception:  # noqa: BLE001
        return False


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test run; dropped afterwards. Yields its SQLAlchemy URL."""
    import psycopg2

    name = f"tidelake_catalog_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield f"{PG_DSN}/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server (S3 and Glue) on 127.0.0.1; yields its endpoint URL."""
    exe = shutil.which("moto_server")
    if exe is None:
        raise RuntimeError("moto_server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def make_bucket(endpoint: str, bucket: str) -> None:
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)


def local_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
