"""Whole-platform storage tests: ``tidelake serve`` on moto's S3 server.

The metadata store lives outside the broker's data directory (a SQLite file
in the test's temporary directory) so that a fresh broker with an empty data
directory sees the same topics and objects.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3

from tests.integration.s3stream.conftest import BUCKET, moto_endpoint

__all__ = ["BUCKET", "moto_endpoint", "s3_keys", "storage_env"]


def storage_env(
    endpoint: str, prefix: str, metadata_db: Path, wal_kind: str, **storage: str
) -> dict[str, str]:
    env = {
        "TIDELAKE_BROKER_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
        "TIDELAKE_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "TIDELAKE_OBJECT_STORE_URL": f"s3://{BUCKET}/{prefix}",
        "TIDELAKE_S3_ENDPOINT_URL": endpoint,
        "TIDELAKE_S3_REGION": "us-east-1",
        "TIDELAKE_S3_ACCESS_KEY_ID": "test",
        "TIDELAKE_S3_SECRET_ACCESS_KEY": "test",
        "TIDELAKE_METADATA_URL": f"sqlite:///{metadata_db}",
        "TIDELAKE_STORAGE_WAL_KIND": wal_kind,
    }
    env.update({f"TIDELAKE_STORAGE_{k.upper()}": v for k, v in storage.items()})
    return env


def new_prefix() -> str:
    return uuid.uuid4().hex


def s3_keys(endpoint: str, prefix: str) -> list[str]:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys.extend(item["Key"][len(prefix) + 1 :] for item in page.get("Contents", []))
    return keys
