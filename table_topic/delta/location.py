"""Where a topic's Delta table lives: ``<root>/<namespace path>/<table>``.

The root is ``TIDELAKE_TABLE_TOPIC_DELTA_LOCATION`` or, by default, ``delta``
under the Iceberg catalog's warehouse; delta-rs storage options come from
``TIDELAKE_TABLE_TOPIC_DELTA_STORAGE_OPTIONS`` or, by default, from the
catalog's ``s3.*`` FileIO properties (the warehouse's endpoint and keys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from table_topic.errors import TableTopicConfigError

__all__ = [
    "DeltaLocation",
    "object_filesystem",
    "require",
    "root_path",
    "storage_options_from_fileio",
]

_FILEIO_TO_DELTA = {
    "s3.endpoint": "AWS_ENDPOINT_URL",
    "s3.region": "AWS_REGION",
    "s3.access-key-id": "AWS_ACCESS_KEY_ID",
    "s3.secret-access-key": "AWS_SECRET_ACCESS_KEY",
    "s3.session-token": "AWS_SESSION_TOKEN",
}


def storage_options_from_fileio(props: Mapping[str, str]) -> dict[str, str]:
    """delta-rs (object_store) options for the S3 a pyiceberg FileIO is configured for."""
    out = {delta: props[ice] for ice, delta in _FILEIO_TO_DELTA.items() if props.get(ice)}
    if out.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        out["AWS_ALLOW_HTTP"] = "true"
    if "AWS_ENDPOINT_URL" in out:
        out.setdefault("AWS_S3_ADDRESSING_STYLE", "path")
        out.setdefault("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
    return out


@dataclass(frozen=True)
class DeltaLocation:
    """The root of the Delta tables and how to reach it."""

    root: str
    storage_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        location: str,
        storage_options: Mapping[str, str],
        catalog_properties: Mapping[str, str],
    ) -> DeltaLocation | None:
        """From the settings, else from the catalog's warehouse (None: nowhere known)."""
        root = location
        if not root:
            warehouse = catalog_properties.get("warehouse", "")
            if not warehouse.startswith(("file://", "s3://", "s3a://", "/")):
                return None
            root = warehouse.rstrip("/") + "/delta"
        options = dict(storage_options) or storage_options_from_fileio(catalog_properties)
        if root.startswith("s3a://"):
            root = "s3://" + root[len("s3a://") :]
        if root.startswith("s3://"):
            # S3 has no atomic rename; delta-rs commits with a conditional put (If-None-Match)
            options.setdefault("AWS_CONDITIONAL_PUT", "etag")
        return cls(root.rstrip("/"), options)

    @property
    def local(self) -> bool:
        return self.root.startswith(("file://", "/"))

    def table_uri(self, identifier: Sequence[str]) -> str:
        """Local roots as a plain path (created on demand), others as URIs."""
        if self.local:
            base = (
                Path(unquote(urlparse(self.root).path)) if "://" in self.root else Path(self.root)
            )
            path = base.joinpath(*identifier)
            path.mkdir(parents=True, exist_ok=True)
            return str(path)
        return "/".join([self.root, *identifier])


def object_filesystem(location: DeltaLocation) -> Any:
    """An fsspec filesystem over the root (s3fs for S3, local otherwise) and the root's
    path in it."""
    if location.local:
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem()
    import s3fs  # pyiceberg[s3fs]; pyarrow's own S3 multipart completion trips over moto

    o = location.storage_options
    client: dict[str, str] = {"region_name": o.get("AWS_REGION") or "us-east-1"}
    if o.get("AWS_ENDPOINT_URL"):
        client["endpoint_url"] = o["AWS_ENDPOINT_URL"]
    return s3fs.S3FileSystem(
        key=o.get("AWS_ACCESS_KEY_ID"),
        secret=o.get("AWS_SECRET_ACCESS_KEY"),
        token=o.get("AWS_SESSION_TOKEN"),
        client_kwargs=client,
    )


def root_path(location: DeltaLocation) -> str:
    """The root as a path of :func:`object_filesystem` (no scheme)."""
    if location.local:
        return unquote(urlparse(location.root).path) if "://" in location.root else location.root
    return location.root.split("://", 1)[1]


def require(location: DeltaLocation | None, topic: str) -> DeltaLocation:
    if location is None:
        raise TableTopicConfigError(
            f"topic {topic}: table.topic.format writes Delta, but the catalog has no file:// "
            "or s3:// warehouse: set TIDELAKE_TABLE_TOPIC_DELTA_LOCATION"
        )
    return location
