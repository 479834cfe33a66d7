"""ApiVersions (key 18): the versions this broker speaks."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext

__all__ = ["handle", "api_keys"]


def api_keys() -> list[dict[str, int]]:
    from ingest.handlers import api_table

    return [
        {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
        for s in sorted(api_table().values(), key=lambda s: s.key)
    ]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": api_keys(), "throttle_time": 0}
