"""The object store contract over the memory and directory backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingest.errors import ConfigError
from ingest.s3stream.objectstore import (
    FileObjectStore,
    MemoryObjectStore,
    ObjectStore,
    open_object_store,
)
from tests.unit.s3stream.object_store_contract import ObjectStoreContract


@pytest.fixture(params=["memory", "file"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    s = open_object_store("memory://" if request.param == "memory" else f"file://{tmp_path}/objs")
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


async def test_file_store_rejects_escaping_keys(tmp_path: Path) -> None:
    s = FileObjectStore(tmp_path / "root")
    with pytest.raises(ConfigError):
        await s.put("../evil", b"x")
