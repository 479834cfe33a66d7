"""An object store in a local directory.

Keys map to files below the root (``/`` separates directories). A put writes
a temporary file, fsyncs it, renames it into place and fsyncs the directory,
so a returned put is atomic and durable. The temporary file is written
``writeback_bytes`` at a time, each step on the disk before the next (see
:mod:`~ingest.s3stream.objectstore.writeback`): a file WAL on the same disk
does not wait behind an object's whole burst. A create-only put (``if_absent``)
hard-links the temporary file to the key instead of renaming it: ``link``
fails atomically if the key exists. Blocking file I/O runs in worker threads.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ingest.errors import ConfigError
from ingest.s3stream._threads import ThreadRunner
from ingest.s3stream.errors import ObjectExistsError, ObjectNotFoundError
from ingest.s3stream.objectstore.api import ObjectInfo
from ingest.s3stream.objectstore.writeback import write_all

T = TypeVar("T")

__all__ = ["FileObjectStore"]

_TMP_SUFFIX = ".tmp-upload"
DEFAULT_WRITEBACK_BYTES = 64 * 1024


class FileObjectStore:
    def __init__(
        self,
        root: str | Path,
        *,
        io_threads: int = 4,
        writeback_bytes: int = DEFAULT_WRITEBACK_BYTES,
    ) -> None:
        if writeback_bytes < 0:
            raise ConfigError("writeback_bytes", f"must be >= 0, got {writeback_bytes}")
        self._writeback = writeback_bytes
        self._root = Path(root).resolve()
        self._root.mkdir(parents=True, exist_ok=True)
        self._run = ThreadRunner(io_threads, "file-object-store")

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ConfigError("key", f"invalid object key {key!r}")
        return self._root / key

    def _put(self, key: str, data: bytes | bytearray | memoryview, if_absent: bool) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data, self._writeback)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        if if_absent:
            try:
                os.link(tmp, path)  # atomic: fails if the key exists
            except FileExistsError:
                raise ObjectExistsError(f"object {key!r} exists") from None
            finally:
                tmp.unlink(missing_ok=True)
        else:
            os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _get(self, key: str, start: int | None, end: int | None) -> bytes:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"no object {key!r}") from None
        try:
            size = os.fstat(fd).st_size
            lo = 0 if start is None else min(start, size)
            hi = size if end is None else min(end, size)
            if hi <= lo:
                return b""
            return os.pread(fd, hi - lo, lo)
        finally:
            os.close(fd)

    def _delete(self, keys: list[str]) -> None:
        for k in keys:
            self._path(k).unlink(missing_ok=True)

    def _list(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        for dirpath, _dirs, files in os.walk(self._root):
            for name in files:
                if name.endswith(_TMP_SUFFIX):
                    continue
                full = os.path.join(dirpath, name)
                key = os.path.relpath(full, self._root).replace(os.sep, "/")
                if key.startswith(prefix):
                    try:
                        out.append(ObjectInfo(key, os.path.getsize(full)))
                    except FileNotFoundError:
                        continue
        out.sort(key=lambda o: o.key)
        return out

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        await self._run(self._put, key, data, if_absent)

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        return await self._run(self._get, key, start, end)

    async def get_then(
        self,
        key: str,
        start: int | None,
        end: int | None,
        then: Callable[[bytes | memoryview], T],
    ) -> T:
        def read() -> T:
            return then(self._get(key, start, end))

        return await self._run(read)

    async def delete(self, keys: list[str]) -> None:
        await self._run(self._delete, keys)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        return await self._run(self._list, prefix)

    async def close(self) -> None:
        self._run.close()
