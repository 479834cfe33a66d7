"""ApiVersions (key 18): the versions this broker speaks.

The response is built as a version 4 entity (every field the served versions
have); the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import datetime
import re
from typing import Union

from kio.schema.api_versions import v0, v1, v2, v3, v4
from kio.schema.api_versions.v4.response import ApiVersion, ApiVersionsResponse
from kio.static.primitive import i16, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode

__all__ = ["handle", "api_keys", "ApiVersionsRequest"]

ApiVersionsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.ApiVersionsRequest,
    v1.ApiVersionsRequest,
    v2.ApiVersionsRequest,
    v3.ApiVersionsRequest,
    v4.ApiVersionsRequest,
]


def api_keys() -> list[dict[str, int]]:
    """Every API this broker serves to clients with its version range, as
    mappings (the dispatcher builds them into any version's response); the
    brokers' own (Envelope) are served but not listed."""
    from ingest.handlers import api_table

    return [
        {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
        for s in sorted(api_table().values(), key=lambda s: s.key)
        if not s.internal
    ]


# What Kafka accepts as client_software_name / _version (ApiVersions v3+).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_software(request: ApiVersionsRequest) -> bool:
    if isinstance(request, v0.ApiVersionsRequest | v1.ApiVersionsRequest | v2.ApiVersionsRequest):
        return True  # v0-v2 carry neither
    return all(
        _SOFTWARE.fullmatch(v) is not None
        for v in (request.client_software_name, request.client_software_version)
    )


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    no_throttle = i32Timedelta.parse(datetime.timedelta(0))
    if not _valid_software(request):
        # as Kafka: the request parsed but names its client in a way the broker refuses
        return ApiVersionsResponse(
            error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=no_throttle
        )
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            ApiVersion(
                api_key=i16(k["api_key"]),
                min_version=i16(k["min_version"]),
                max_version=i16(k["max_version"]),
            )
            for k in api_keys()
        ),
        throttle_time=no_throttle,
    )
