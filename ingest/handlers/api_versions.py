"""ApiVersions (key 18): the versions this broker speaks."""

from __future__ import annotations

import re
from typing import Any

from ingest.handlers.base import RequestContext

__all__ = ["handle", "api_keys"]


def api_keys() -> list[dict[str, int]]:
    from ingest.handlers import api_table

    return [
        {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
        for s in sorted(api_table().values(), key=lambda s: s.key)
    ]


# What Kafka accepts as client_software_name / _version (ApiVersions v3+).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_INVALID_REQUEST = 42


def _valid_software(request: Any) -> bool:
    name = getattr(request, "client_software_name", None)
    version = getattr(request, "client_software_version", None)
    if name is None and version is None:  # v0-v2 carry neither
        return True
    return all(
        isinstance(v, str) and _SOFTWARE.fullmatch(v) is not None for v in (name, version)
    )


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not _valid_software(request):
        # as Kafka: the request parsed but names its client in a way the broker refuses
        return {"error_code": _INVALID_REQUEST, "api_keys": [], "throttle_time": 0}
    return {"error_code": 0, "api_keys": api_keys(), "throttle_time": 0}
