"""Backpressure from object storage to produce: when uploads fall behind.

Appended data stays in memory (the log cache) until it is uploaded, so a slow
or failing object store makes it pile up. Two signals keep producers in the
picture instead of letting acknowledgements stall silently:

- ``throttle_ms()``: the throttle time a Produce response should carry (the
  client then waits that long before its next request to this broker, and
  reports it). 0 while uploads keep up; while the object store is degraded at
  least ``_DEGRADED_THROTTLE_MS``, rising with the share of
  ``max_pending_upload_bytes`` in use up to ``_MAX_THROTTLE_MS``; without a
  degraded store, from half of it.
- ``refusal()``: a reason to refuse an append before it takes an offset
  (``StreamBackpressureError``, retriable), or ``None``: when
  ``max_pending_upload_bytes`` are pending, or half of it while the object
  store is degraded (slow uploads then catch up from a smaller backlog, and
  memory stays bounded).

Cheap enough for every append: integer comparisons, and the store's health
flag (:attr:`ObjectStoreHealth.degraded`) read without a lock.
"""

from __future__ import annotations

from typing import Any

from ingest.s3stream.cache import LogCache
from ingest.s3stream.objectstore.health import ObjectStoreHealth

__all__ = ["UploadBackpressure", "storage_health"]

_DEGRADED_THROTTLE_MS = 100
_MAX_THROTTLE_MS = 1000
_DEGRADED_REFUSE_SHARE = 0.5  # of max_pending_upload_bytes, while degraded
_THROTTLE_SHARE = 0.5  # of max_pending_upload_bytes: throttle from here when healthy


def health_of(objects: Any) -> ObjectStoreHealth | None:
    """The object store's health tracker, if it keeps one (the S3 store does)."""
    health = getattr(objects, "health", None)
    return health if isinstance(health, ObjectStoreHealth) else None


class UploadBackpressure:
    """Backpressure signals for one engine (see the module docstring)."""

    def __init__(self, log_cache: LogCache, max_pending_bytes: int, objects: Any) -> None:
        self._cache = log_cache
        self._max = max_pending_bytes
        self.health = health_of(objects)

    @property
    def pending_share(self) -> float:
        """Pending (not yet uploaded) bytes as a share of the limit."""
        return self._cache.unuploaded_bytes / self._max

    def _degraded(self) -> bool:
        return self.health is not None and self.health.degraded

    def throttle_ms(self) -> int:
        share = self.pending_share
        degraded = self._degraded()
        if not degraded and share < _THROTTLE_SHARE:
            return 0
        ms = int(_MAX_THROTTLE_MS * min(share, 1.0))
        return max(ms, _DEGRADED_THROTTLE_MS if degraded else 0)

    def refusal(self) -> str | None:
        pending = self._cache.unuploaded_bytes
        if pending >= self._max:
            return f"{pending} bytes wait for upload; retry later"
        if pending >= self._max * _DEGRADED_REFUSE_SHARE and self._degraded():
            return (
                f"object storage is degraded and {pending} bytes wait for upload "
                f"(limit {self._max} while degraded: {int(self._max * _DEGRADED_REFUSE_SHARE)}); "
                "retry later"
            )
        return None


def storage_health(engine: Any) -> dict[str, Any]:
    """The object store's health and the upload backlog of ``engine``, JSON-able
    (for the admin API and ``tidelake tables status``)."""
    objects = getattr(engine, "object_store", None)
    health = health_of(objects)
    out: dict[str, Any] = {"object_store": type(objects).__name__ if objects else None}
    if health is not None:
        out.update(health.snapshot().as_json())
    else:
        out["state"] = "healthy" if objects is not None else "unknown"
    cache = getattr(engine, "log_cache", None)
    config = getattr(engine, "config", None)
    if isinstance(cache, LogCache) and config is not None:
        out["pending_upload_bytes"] = cache.unuploaded_bytes
        out["max_pending_upload_bytes"] = config.max_pending_upload_bytes
    throttle = getattr(engine, "backpressure_ms", None)
    if isinstance(throttle, int):
        out["produce_throttle_ms"] = throttle
    return out
