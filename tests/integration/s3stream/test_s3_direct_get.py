"""S3 GETs sent directly over http.client (the read hot path), against moto.

The direct path must serve plain answers itself and hand everything else to
boto3: the tests check both by its counters, and that moto, with request
authentication on, accepts its signatures.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import boto3
import pytest

from ingest.errors import StorageError
from ingest.s3stream.errors import ObjectNotFoundError
from ingest.s3stream.objectstore import open_object_store
from ingest.s3stream.objectstore.direct_get import DirectGetter
from ingest.s3stream.objectstore.s3 import S3ObjectStore
from tests.integration.s3stream.conftest import BUCKET, moto_server, s3_options
from tests.integration.s3stream.fault_proxy import FaultProxy

MIB = 1 << 20


def _direct(store: S3ObjectStore) -> DirectGetter:
    direct = store._direct
    assert direct is not None, "the direct GET path is off"
    return direct


@pytest.fixture
async def store(moto_endpoint: str) -> AsyncIterator[S3ObjectStore]:
    s = open_object_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **s3_options(moto_endpoint))
    assert isinstance(s, S3ObjectStore)
    yield s
    await s.close()


async def test_plain_and_ranged_gets_go_direct(store: S3ObjectStore) -> None:
    data = os.urandom(3 * MIB + 11)
    await store.put("a/obj", data)
    direct = _direct(store)
    assert await store.get("a/obj") == data
    assert await store.get("a/obj", 100, 200) == data[100:200]
    assert await store.get_then("a/obj", None, None, bytes) == data
    assert await store.get_then("a/obj", MIB, None, bytes) == data[MIB:]
    assert (direct.gets, direct.fallbacks) == (4, 0)
    assert direct.buffers.allocated >= 1  # large bodies of get_then land in pooled buffers


async def test_a_missing_key_and_a_range_past_the_end_are_answered_directly(
    store: S3ObjectStore,
) -> None:
    await store.put("b/obj", b"0123456789")
    direct = _direct(store)
    with pytest.raises(ObjectNotFoundError):
        await store.get("b/missing")
    assert await store.get("b/obj", 20, 30) == b""
    assert (direct.gets, direct.fallbacks) == (2, 0)


async def test_keys_that_need_escaping_round_trip(store: S3ObjectStore) -> None:
    key = "c/with space+plus%percent/ü=eq&amp"
    await store.put(key, b"escaped")
    assert await store.get(key) == b"escaped"
    assert _direct(store).fallbacks == 0


async def test_a_store_whose_direct_path_cannot_be_set_up_reads_through_boto3(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("cannot derive the GET URL")

    monkeypatch.setattr("ingest.s3stream.objectstore.s3.DirectGetter.__init__", broken)
    store = open_object_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **s3_options(moto_endpoint))
    assert isinstance(store, S3ObjectStore) and store._direct is None
    try:
        await store.put("e/obj", b"through boto3")
        assert await store.get("e/obj") == b"through boto3"
        assert await store.get_then("e/obj", 8, None, bytes) == b"boto3"
    finally:
        await store.close()


async def test_server_errors_fall_back_to_boto3_and_its_retries(moto_endpoint: str) -> None:
    proxy = FaultProxy(moto_endpoint, delay=2.0).start()
    opts = dict(s3_options(proxy.endpoint), max_attempts=5, read_timeout=1.0, connect_timeout=1.0)
    store = open_object_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **opts)
    assert isinstance(store, S3ObjectStore)
    try:
        data = os.urandom(2 * MIB)
        await store.put("d/obj", data)
        direct = _direct(store)
        # 500s, answers slower than the read timeout and dropped connections,
        # each followed by a good answer
        proxy.cycle(["error", "ok", "slow", "ok", "drop", "ok"])
        proxy.mode = "mixed"
        for _ in range(6):
            assert await store.get_then("d/obj", None, None, bytes) == data
        assert direct.fallbacks > 0
        proxy.mode = "error"  # boto3 gives up too: the caller sees a storage error
        with pytest.raises(StorageError):
            await store.get("d/obj")
        proxy.mode = "ok"
        before = direct.gets
        assert await store.get("d/obj") == data
        assert direct.gets == before + 1  # straight back on the direct path
    finally:
        await store.close()
        proxy.close()


@pytest.fixture
def authenticating_moto() -> Iterator[str]:
    """A moto server that checks SigV4 signatures and IAM permissions after
    the first four requests (which create the user, its key and the bucket)."""
    with moto_server(INITIAL_NO_AUTH_ACTION_COUNT="4") as url:
        yield url


async def test_moto_accepts_the_direct_paths_signatures(authenticating_moto: str) -> None:
    url = authenticating_moto
    kw = dict(
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    iam = boto3.client("iam", **kw)
    iam.create_user(UserName="reader")
    iam.put_user_policy(
        UserName="reader",
        PolicyName="all",
        PolicyDocument='{"Version":"2012-10-17","Statement":'
        '[{"Effect":"Allow","Action":"*","Resource":"*"}]}',
    )
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    boto3.client("s3", **kw).create_bucket(Bucket="signed")

    opts = dict(
        s3_options(url),
        access_key_id=key["AccessKeyId"],
        secret_access_key=key["SecretAccessKey"],
        max_attempts=1,
    )
    store = open_object_store("s3://signed/p", **opts)
    wrong = open_object_store("s3://signed/p", **dict(opts, secret_access_key="not-the-secret"))
    assert isinstance(store, S3ObjectStore) and isinstance(wrong, S3ObjectStore)
    try:
        data = os.urandom(MIB + 3)
        await store.put("x/obj", data)
        assert await store.get_then("x/obj", 10, None, bytes) == data[10:]
        assert await store.get("x/obj", 0, 5) == data[:5]
        odd = "x/with space+plus%percent/ü=eq&amp~tilde"  # signed as escaped
        await store.put(odd, b"odd")
        assert await store.get(odd) == b"odd"
        assert (_direct(store).gets, _direct(store).fallbacks) == (3, 0)
        # a bad signature is refused (403): handed to boto3, refused again
        with pytest.raises(StorageError, match="SignatureDoesNotMatch|AccessDenied|403"):
            await wrong.get("x/obj")
        assert _direct(wrong).fallbacks == 1 and _direct(wrong).enabled
        # refusals that retrying cannot fix, three in a row: boto3 alone from then on
        for _ in range(3):
            with pytest.raises(StorageError):
                await wrong.get("x/obj")
        assert _direct(wrong).fallbacks == 3 and not _direct(wrong).enabled
    finally:
        await store.close()
        await wrong.close()
