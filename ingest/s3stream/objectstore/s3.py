"""An object store on S3 (or any S3-compatible service) through boto3.

boto3 is blocking, so every call runs in a worker thread; a semaphore bounds
the requests in flight. Large puts use multipart upload. Retries are
botocore's (``standard`` or ``adaptive`` mode).

Create-only puts send ``If-None-Match: *`` (on ``PutObject``, or on
``CompleteMultipartUpload`` for a multipart put). S3 answers 412
``PreconditionFailed`` if the key exists (``ObjectExistsError``) and 409
``ConditionalRequestConflict`` if a conflicting write to the key was in
progress: that one does not say the key exists, and AWS documents it as
retriable, so the put is retried (a multipart put from the start).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import io
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ingest.errors import StorageError
from ingest.s3stream.errors import ObjectExistsError, ObjectNotFoundError
from ingest.s3stream.objectstore.api import ObjectInfo
from ingest.s3stream.objectstore.direct_get import DirectGetter
from ingest.s3stream.objectstore.health import ObjectStoreHealth

__all__ = ["S3ObjectStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_MIB = 1024 * 1024
_CONFLICT_ATTEMPTS = 6  # tries of a create-only put that meets 409 ConditionalRequestConflict
# error codes that say "try again later" whatever their HTTP status
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "RequestLimitExceeded",
        "TooManyRequests",
    }
)
# codes that answer the request (the key is missing, exists, or moved on):
# not failures of the store
_ANSWER_CODES = frozenset(
    {
        "NoSuchKey",
        "404",
        "NotFound",
        "PreconditionFailed",
        "412",
        "InvalidRange",
        "ConditionalRequestConflict",
        "NoSuchUpload",
    }
)


def _attempt_failure(response: Any, caught_exception: BaseException | None) -> str | None:
    """What went wrong with one botocore attempt, or ``None`` if S3 answered."""
    if caught_exception is not None:
        return type(caught_exception).__name__
    if not response:
        return None
    http, parsed = response
    status = int(getattr(http, "status_code", 0) or 0)
    code = str((parsed or {}).get("Error", {}).get("Code", "") or "")
    if status >= 500 or status == 429 or code in _TRANSIENT_CODES:
        return f"{status} {code}".strip()
    return None


def _error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


class _ConditionalConflictError(StorageError):
    """S3 409 ConditionalRequestConflict: a concurrent write to the key; retry."""


class ViewReader(io.RawIOBase):
    """A seekable file over a memoryview, read in the thread that sends it:
    a request body without a copy of it on the event loop (botocore takes
    bytes or a file, not a memoryview). ``len()`` is its size."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self._pos = 0

    def __len__(self) -> int:
        return len(self._view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._view) - self._pos)
        if n <= 0:
            return 0
        memoryview(buffer).cast("B")[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        return n

    def read(self, size: int | None = -1) -> bytes:
        end = (
            len(self._view) if size is None or size < 0 else min(len(self._view), self._pos + size)
        )
        start, self._pos = self._pos, max(self._pos, end)
        return bytes(self._view[start:end])

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos


class S3ObjectStore:
    """Objects under ``s3://bucket/prefix``.

    Options: ``endpoint_url``, ``region``, ``access_key_id``,
    ``secret_access_key``, ``session_token``, ``path_style`` (path-style
    addressing, needed by MinIO and moto), ``max_in_flight`` (requests in
    flight), ``multipart_threshold`` / ``part_size`` (bytes),
    ``retry_mode`` (``standard`` | ``adaptive``), ``max_attempts`` and
    ``direct_get`` (GETs straight over ``http.client``, signed by botocore,
    falling back to boto3 for anything but a plain answer: see
    :mod:`~ingest.s3stream.objectstore.direct_get`; on by default) and
    ``read_buffer_bytes`` (recycled buffers for large reads kept for the block
    cache: size it to the block cache plus the read-ahead in flight).

    ``health`` (:class:`~ingest.s3stream.objectstore.health.ObjectStoreHealth`)
    records every attempt (through botocore's ``needs-retry`` event, and the
    direct GETs) and every call: it logs degraded storage and feeds the
    metrics and status.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        path_style: bool = False,
        max_in_flight: int = 32,
        multipart_threshold: int = 32 * _MIB,
        part_size: int = 16 * _MIB,
        retry_mode: str = "standard",
        max_attempts: int = 5,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        direct_get: bool = True,
        read_buffer_bytes: int = 192 * _MIB,
    ) -> None:
        if part_size < 5 * _MIB:
            raise StorageError("part_size must be at least 5 MiB")
        self._bucket = bucket
        self._prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._multipart_threshold = max(multipart_threshold, part_size)
        self._part_size = part_size
        self._sem = asyncio.Semaphore(max_in_flight)
        # Our own threads: S3 calls must neither starve nor be starved by the
        # loop's default executor.
        self._executor = ThreadPoolExecutor(max_in_flight, thread_name_prefix="s3-object-store")
        config = Config(
            retries={"mode": retry_mode, "max_attempts": max_attempts},
            s3={"addressing_style": "path" if path_style else "auto"},
            max_pool_connections=max_in_flight,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            # Every range we read is checked against our own per-batch CRC32C, so
            # botocore's CRC32 of GET bodies (computed chunk by chunk in Python,
            # holding the GIL) is redundant: measured on moto, raw GETs went from
            # 552 to 835 MB/s without it. Uploads keep their request checksums.
            response_checksum_validation="when_required",
        )
        # Explicit keys go to the session, so the client and the direct GET
        # path sign with the same credentials (else the default chain's).
        session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
        )
        self._client: Any = session.client(
            "s3", endpoint_url=endpoint_url, region_name=region, config=config
        )
        self._new_client = functools.partial(
            session.client, "s3", endpoint_url=endpoint_url, region_name=region
        )
        self._config = config
        self._single: S3ObjectStore | None = None  # see without_retries()
        self._owns_resources = True
        self.health = ObjectStoreHealth(f"object storage s3://{bucket}/{self._prefix}")
        self._client.meta.events.register("needs-retry.s3", self._on_attempt)
        self._direct: DirectGetter | None = None
        credentials = session.get_credentials()
        if direct_get and DirectGetter.usable(self._client, credentials):
            try:
                self._direct = DirectGetter(
                    self._client,
                    credentials,
                    bucket,
                    connect_timeout=connect_timeout,
                    read_timeout=read_timeout,
                    buffer_bytes=read_buffer_bytes,
                    health=self.health,
                )
            except Exception:  # noqa: BLE001 - an optimisation; boto3 serves every GET
                log.warning("direct S3 GETs unavailable; GETs go through boto3", exc_info=True)

    def _full(self, key: str) -> str:
        return self._prefix + key

    def without_retries(self) -> S3ObjectStore:
        """This store with botocore making one attempt per request (same
        bucket, prefix, threads, request slots, health and direct GETs), for a
        caller that retries on its own schedule: the object WAL's puts (see
        :mod:`~ingest.s3stream.objectstore.retry`). Closing this store closes
        it; closing the view closes only its client."""
        if self._single is None:
            view = copy.copy(self)
            view._client = self._new_client(
                config=self._config.merge(
                    Config(retries={"mode": "standard", "total_max_attempts": 1})
                )
            )
            view._client.meta.events.register("needs-retry.s3", view._on_attempt)
            view._single = view
            view._owns_resources = False
            self._single = view
        return self._single

    def _on_attempt(
        self,
        response: Any = None,
        caught_exception: BaseException | None = None,
        operation: Any = None,
        attempts: int = 1,
        **_: Any,
    ) -> None:
        """botocore's ``needs-retry`` hook, after every attempt (in the
        calling thread); decides nothing, only records."""
        self.health.attempt(
            getattr(operation, "name", "S3"),
            _attempt_failure(response, caught_exception),
            retry=attempts > 1,
        )

    async def _call(self, op: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in an S3 thread, S3 errors mapped to ours;
        recorded in ``health`` as one ``op`` call."""
        async with self._sem:
            loop = asyncio.get_running_loop()
            started = time.monotonic()
            error: str | None = None
            try:
                return await loop.run_in_executor(
                    self._executor, functools.partial(fn, *args, **kwargs)
                )
            except ClientError as e:
                code = _error_code(e)
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code not in _ANSWER_CODES:
                    # "503 SlowDown: ...", as an attempt's failure is recorded
                    what = f"{status or ''} {code or type(e).__name__}".strip()
                    error = f"{what}: {e}"
                if code in ("NoSuchKey", "404", "NotFound"):
                    raise ObjectNotFoundError(str(e)) from e
                if code in ("PreconditionFailed", "412") or status == 412:
                    raise ObjectExistsError(str(e)) from e
                if code == "ConditionalRequestConflict":
                    raise _ConditionalConflictError(f"S3 error: {e}") from e
                raise StorageError(f"S3 error: {e}") from e
            except (ObjectNotFoundError, ObjectExistsError):
                raise
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
                raise
            finally:
                self.health.call(op, time.monotonic() - started, error)

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        delay = 0.05
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                await self._put_once(key, data, if_absent)
                return
            except _ConditionalConflictError:
                if attempt == _CONFLICT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay *= 2

    async def _put_once(
        self, key: str, data: bytes | bytearray | memoryview, if_absent: bool
    ) -> None:
        condition = {"IfNoneMatch": "*"} if if_absent else {}
        if len(data) < self._multipart_threshold:
            body = data if isinstance(data, bytes | bytearray) else ViewReader(data)
            await self._call(
                "PutObject",
                self._client.put_object,
                Bucket=self._bucket,
                Key=self._full(key),
                Body=body,
                **condition,
            )
            return
        await self._put_multipart(key, memoryview(data), condition)

    async def _put_multipart(self, key: str, view: memoryview, condition: dict[str, str]) -> None:
        full = self._full(key)
        created = await self._call(
            "CreateMultipartUpload",
            self._client.create_multipart_upload,
            Bucket=self._bucket,
            Key=full,
        )
        upload_id = created["UploadId"]

        async def part(number: int, lo: int) -> dict[str, Any]:
            # no copy of the part here: on the event loop, copying every part
            # of a 64 MiB compaction output at once stalled it for ~30 ms
            resp = await self._call(
                "UploadPart",
                self._client.upload_part,
                Bucket=self._bucket,
                Key=full,
                UploadId=upload_id,
                PartNumber=number,
                Body=ViewReader(view[lo : lo + self._part_size]),
            )
            return {"PartNumber": number, "ETag": resp["ETag"]}

        try:
            parts = await asyncio.gather(
                *(part(i + 1, lo) for i, lo in enumerate(range(0, len(view), self._part_size)))
            )
            await self._call(
                "CompleteMultipartUpload",
                self._client.complete_multipart_upload,
                Bucket=self._bucket,
                Key=full,
                UploadId=upload_id,
                MultipartUpload={"Parts": list(parts)},
                **condition,
            )
        except BaseException:
            try:
                await self._call(
                    "AbortMultipartUpload",
                    self._client.abort_multipart_upload,
                    Bucket=self._bucket,
                    Key=full,
                    UploadId=upload_id,
                )
            except Exception:  # noqa: BLE001 - best effort; the original error wins
                pass
            raise

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        data: bytes = await self._call("GetObject", self._reader(key, start, end, pooled=False))
        return data

    async def get_then(
        self,
        key: str,
        start: int | None,
        end: int | None,
        then: Callable[[bytes | memoryview], T],
    ) -> T:
        read = self._reader(key, start, end, pooled=True)

        def read_then() -> T:
            return then(read())

        result: T = await self._call("GetObject", read_then)
        return result

    def _reader(
        self, key: str, start: int | None, end: int | None, *, pooled: bool
    ) -> Callable[[], bytes | memoryview]:
        """A blocking read of ``[start, end)`` of ``key``: direct when it can
        be, else (or when the direct answer is not a plain one) through boto3."""
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._full(key)}
        if start is not None or end is not None:
            lo = start or 0
            if end is not None and end <= lo:
                return lambda: b""
            kwargs["Range"] = f"bytes={lo}-" if end is None else f"bytes={lo}-{end - 1}"
        direct = self._direct

        def read() -> bytes | memoryview:
            if direct is not None and direct.enabled:
                data = direct.get(kwargs["Key"], kwargs.get("Range"), pooled=pooled)
                if data is not None:
                    return data
            try:
                resp = self._client.get_object(**kwargs)
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") == "InvalidRange":
                    return b""
                raise
            return bytes(resp["Body"].read())

        return read

    async def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            resp = await self._call(
                "DeleteObjects",
                self._client.delete_objects,
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": self._full(k)} for k in chunk], "Quiet": True},
            )
            errors = resp.get("Errors") or []
            if errors:
                raise StorageError(f"S3 delete failed for {len(errors)} keys: {errors[:3]}")

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        def run() -> list[ObjectInfo]:
            out: list[ObjectInfo] = []
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self._bucket, Prefix=self._full(prefix)):
                for item in page.get("Contents", []):
                    out.append(ObjectInfo(item["Key"][len(self._prefix) :], int(item["Size"])))
            return out

        result: list[ObjectInfo] = await self._call("ListObjectsV2", run)
        result.sort(key=lambda o: o.key)
        return result

    async def close(self) -> None:
        if not self._owns_resources:
            await asyncio.to_thread(self._client.close)
            return
        if self._direct is not None:
            await asyncio.to_thread(self._direct.close)
        await asyncio.to_thread(self._client.close)
        if self._single is not None:
            await asyncio.to_thread(self._single._client.close)
        self._executor.shutdown(wait=False)
