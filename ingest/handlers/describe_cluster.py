"""DescribeCluster (key 60)."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    b = ctx.broker
    return {
        "throttle_time": 0,
        "error_code": 0,
        "endpoint_type": 1,
        "cluster_id": b.cluster_id,
        "controller_id": b.config.node_id,
        "brokers": [
            {
                "broker_id": b.config.node_id,
                "host": b.config.public_host,
                "port": b.port,
                "rack": None,
            }
        ],
        "cluster_authorized_operations": -2147483648,
    }
