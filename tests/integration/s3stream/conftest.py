"""A moto S3 server on 127.0.0.1 for the session."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import boto3
import pytest

from tests.support.net import free_port

BUCKET = "tidelake-test"


@contextlib.contextmanager
def moto_server(**env: str) -> Iterator[str]:
    """A moto S3 server on a free 127.0.0.1 port (extra environment ``env``),
    stopped on exit; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", **env),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("moto server did not start")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as url:
        boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        yield url


def s3_options(endpoint: str) -> dict[str, object]:
    return {
        "endpoint_url": endpoint,
        "region": "us-east-1",
        "access_key_id": "test",
        "secret_access_key": "test",
        "path_style": True,
        "multipart_threshold": 8 * 1024 * 1024,
        "part_size": 5 * 1024 * 1024,
    }
