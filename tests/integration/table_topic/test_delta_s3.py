"""Delta table topics on S3 (moto's server): the storage options come from the
catalog's s3.* FileIO settings; rows and each partition's offsets read back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from table_topic.delta.location import DeltaLocation
from table_topic.sink import open_sink
from tests.integration.catalog.backends import make_bucket, moto_server
from tests.unit.table_topic.test_commit import cfg, rows


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


def test_both_on_an_s3_warehouse_commits_and_resumes(moto_url: str, tmp_path: Path) -> None:
    bucket = f"wh-{uuid.uuid4().hex[:8]}"
    make_bucket(moto_url, bucket)
    settings = CatalogSettings(
        data_dir=tmp_path,
        warehouse=f"s3://{bucket}/warehouse",
        s3_endpoint=moto_url,
        s3_region="us-east-1",
        s3_access_key_id="testing",
        s3_secret_access_key="testing",
        extra_properties={"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    catalog = load_platform_catalog(settings)
    location = DeltaLocation.resolve("", {}, catalog.properties)
    assert location is not None and location.root == f"s3://{bucket}/warehouse/delta"
    c = cfg(**{"table.topic.format": "both"})

    def sink():  # type: ignore[no-untyped-def]
        return open_sink(catalog, c, 1 << 20, lambda _p: None, "tid", 2, location)

    s = sink()
    assert s.offsets() is None
    s.ensure_table()
    s.commit([rows([0, 1], {"id": pa.array([1, 2], pa.int64())})], {0: 2})
    s.commit([rows([0], {"id": pa.array([3], pa.int64()), "x": pa.array(["n"])}, 1)], {1: 1})
    assert sink().offsets() == {0: 2, 1: 1}

    uri = f"s3://{bucket}/warehouse/delta/default/t"
    table = DeltaTable(uri, storage_options=location.storage_options)
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    assert table.transaction_version("tidelake:tid:0") == 2
    frame = pl.read_delta(uri, storage_options=location.storage_options)
    assert frame.sort("id")["x"].to_list() == [None, None, "n"]
    iceberg = catalog.load_table(("default", "t")).scan().to_arrow()
    assert sorted(iceberg["id"].to_pylist()) == [1, 2, 3]
