"""The object store contract over S3 (moto server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from ingest.s3stream.objectstore import ObjectStore, open_object_store
from ingest.s3stream.objectstore.s3 import S3ObjectStore
from tests.integration.s3stream.conftest import BUCKET, s3_options
from tests.unit.s3stream.object_store_contract import ObjectStoreContract


@pytest.fixture
async def store(moto_endpoint: str) -> AsyncIterator[ObjectStore]:
    s = open_object_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **s3_options(moto_endpoint))
    assert isinstance(s, S3ObjectStore)
    yield s
    await s.close()


class TestS3ObjectStoreContract(ObjectStoreContract):
    pass
