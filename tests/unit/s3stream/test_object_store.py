"""The object store contract over the memory and directory backends; the S3
backend's conditional-write errors (moto covers its contract: tests/integration)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from ingest.errors import ConfigError
from ingest.s3stream.errors import ObjectExistsError
from ingest.s3stream.objectstore import (
    FileObjectStore,
    MemoryObjectStore,
    ObjectStore,
    open_object_store,
)
from tests.unit.s3stream.object_store_contract import ObjectStoreContract


@pytest.fixture(params=["memory", "file", "file-paced"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    s: ObjectStore
    if request.param == "memory":
        s = open_object_store("memory://")
    elif request.param == "file":
        s = open_object_store(f"file://{tmp_path}/objs", writeback_bytes=0)
    else:  # steps that split the contract's objects off page boundaries
        s = open_object_store(f"file://{tmp_path}/objs", writeback_bytes=65_537)
    yield s
    await s.close()


class TestObjectStoreContract(ObjectStoreContract):
    pass


def test_factory_picks_backend_by_scheme(tmp_path: Path) -> None:
    assert isinstance(open_object_store("memory://"), MemoryObjectStore)
    f = open_object_store(f"file://{tmp_path}/d")
    assert isinstance(f, FileObjectStore) and f.root == (tmp_path / "d").resolve()
    with pytest.raises(ConfigError):
        open_object_store("gs://bucket")
    with pytest.raises(ConfigError):
        open_object_store("file://somehost/dir")


async def test_file_store_leaves_no_temp_files(tmp_path: Path) -> None:
    s = FileObjectStore(tmp_path)
    await s.put("x/y", b"data")
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["y"]


async def test_file_store_refused_create_only_put_leaves_no_temp_files(tmp_path: Path) -> None:
    s = FileObjectStore(tmp_path)
    await s.put("x/y", b"data", if_absent=True)
    with pytest.raises(ObjectExistsError):
        await s.put("x/y", b"other", if_absent=True)
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["y"]
    assert (tmp_path / "x" / "y").read_bytes() == b"data"


def test_file_store_refuses_a_negative_writeback_step(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="writeback_bytes"):
        FileObjectStore(tmp_path, writeback_bytes=-1)


async def test_file_store_rejects_escaping_keys(tmp_path: Path) -> None:
    s = FileObjectStore(tmp_path / "root")
    with pytest.raises(ConfigError):
        await s.put("../evil", b"x")


def _stubbed_s3() -> tuple[Any, Stubber]:
    from ingest.s3stream.objectstore.s3 import S3ObjectStore

    store = S3ObjectStore(
        "bucket", "p", region="us-east-1", access_key_id="k", secret_access_key="s"
    )
    return store, Stubber(store._client)


async def test_s3_create_only_put_sends_if_none_match_and_maps_412_to_object_exists() -> None:
    store, stub = _stubbed_s3()
    expected = {"Bucket": "bucket", "Key": "p/k", "Body": b"x", "IfNoneMatch": "*"}
    stub.add_client_error(
        "put_object", "PreconditionFailed", http_status_code=412, expected_params=expected
    )
    with stub, pytest.raises(ObjectExistsError):
        await store.put("k", b"x", if_absent=True)
    stub.assert_no_pending_responses()
    await store.close()


async def test_s3_create_only_put_is_retried_after_a_409_conflicting_write() -> None:
    store, stub = _stubbed_s3()
    expected = {"Bucket": "bucket", "Key": "p/k", "Body": b"x", "IfNoneMatch": "*"}
    stub.add_client_error(
        "put_object", "ConditionalRequestConflict", http_status_code=409, expected_params=expected
    )
    stub.add_response("put_object", {}, expected)
    with stub:
        await store.put("k", b"x", if_absent=True)  # 409 says "retry", not "exists"
    stub.assert_no_pending_responses()
    await store.close()


async def test_s3_failed_call_is_recorded_with_its_http_status_and_code() -> None:
    # the storage status (`/api/v1/storage`, the console badge) shows the last
    # error; a put that failed for good reads "503 SlowDown" as a failed
    # attempt does, whichever of the two came last
    from ingest.s3stream.errors import StorageError

    store, _ = _stubbed_s3()
    single = store.without_retries()  # one attempt: the failure is the call's
    stub = Stubber(single._client)
    stub.add_client_error("put_object", "SlowDown", http_status_code=503)
    with stub, pytest.raises(StorageError):
        await single.put("k", b"x")
    assert (store.health.last_error or "").startswith(
        "PutObject failed after retries: 503 SlowDown:"
    )
    await store.close()
