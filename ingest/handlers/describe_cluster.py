"""DescribeCluster (key 60).

Built as a version 1 entity; the dispatcher narrows it for version 0 clients.
Brokers are listed at the address of the listener the request came in on
(one without that listener is left out; see :mod:`ingest.handlers.endpoints`).
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.describe_cluster import v0, v1
from kio.schema.describe_cluster.v1.response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i32Timedelta

from ingest.handlers.authorized_operations import ResourceType, operations_field
from ingest.handlers.base import RequestContext
from ingest.handlers.endpoints import brokers_seen
from ingest.protocol.errors import ErrorCode

__all__ = ["handle", "DescribeClusterRequest"]

DescribeClusterRequest = Union[v0.DescribeClusterRequest, v1.DescribeClusterRequest]  # noqa: UP007

_BROKERS = i8(1)  # endpoint_type: brokers (2 is controllers)


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    b = ctx.broker
    return DescribeClusterResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        endpoint_type=_BROKERS,
        cluster_id=b.cluster_id,
        controller_id=BrokerId(b.cluster.controller_id()),
        brokers=tuple(
            DescribeClusterBroker(
                broker_id=BrokerId(e.node_id), host=e.host, port=i32(e.port), rack=e.rack
            )
            for e in brokers_seen(ctx)
        ),
        cluster_authorized_operations=i32(
            operations_field(
                ctx,
                ResourceType.CLUSTER,
                b.cluster_id,
                asked=request.include_cluster_authorized_operations,
            )
        ),
    )
