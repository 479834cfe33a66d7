"""Open an object store from a URL, keyed by scheme."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from ingest.errors import ConfigError
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["open_object_store"]


def _open_memory(url: str, options: dict[str, Any]) -> ObjectStore:
    from ingest.s3stream.objectstore.memory import MemoryObjectStore

    return MemoryObjectStore(**options)


def _open_file(url: str, options: dict[str, Any]) -> ObjectStore:
    from ingest.s3stream.objectstore.file import FileObjectStore

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ConfigError("object_store_url", f"file URLs take no host: {url!r}")
    path = unquote(parts.path)
    if not path:
        raise ConfigError("object_store_url", f"no directory in {url!r}")
    return FileObjectStore(path, **options)


def _open_s3(url: str, options: dict[str, Any]) -> ObjectStore:
    from ingest.s3stream.objectstore.s3 import S3ObjectStore

    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigError("object_store_url", f"no bucket in {url!r}")
    return S3ObjectStore(parts.netloc, parts.path.lstrip("/"), **options)


_OPENERS: dict[str, Callable[[str, dict[str, Any]], ObjectStore]] = {
    "memory": _open_memory,
    "file": _open_file,
    "s3": _open_s3,
}


def open_object_store(url: str, **options: Any) -> ObjectStore:
    """Open the object store named by ``url``.

    - ``memory://`` (tests; no durability)
    - ``file:///absolute/dir`` (a local directory)
    - ``s3://bucket/prefix`` with keyword options of
      :class:`~ingest.s3stream.objectstore.s3.S3ObjectStore` (``endpoint_url``,
      ``region``, ``access_key_id``, ``secret_access_key``, ``path_style``, ...)
    """
    scheme = urlsplit(url).scheme.lower()
    opener = _OPENERS.get(scheme)
    if opener is None:
        raise ConfigError(
            "object_store_url",
            f"unknown scheme {scheme!r} (expected one of {sorted(_OPENERS)})",
        )
    return opener(url, options)
