"""FindCoordinator (10): which broker coordinates a consumer group or a
transactional id.

The response is built as the entity of the highest version of its shape: one
key up to v3, a list of keys from v4; the dispatcher narrows it to the version
the client asked for. A group's coordinator is the broker the cluster view
assigns it (:meth:`ClusterView.coordinator_for`), named at its address on the
listener the request came in on; a coordinator without that listener gets
COORDINATOR_NOT_AVAILABLE, as Kafka answers. A transactional id is refused
when this broker cannot coordinate transactions (see
:func:`ingest.handlers.txn_common.refusal`).
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.find_coordinator import v0 as fc0
from kio.schema.find_coordinator import v1 as fc1
from kio.schema.find_coordinator import v2 as fc2
from kio.schema.find_coordinator import v3 as fc3
from kio.schema.find_coordinator import v4 as fc4
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as OneCoordinator
from kio.schema.find_coordinator.v4.response import Coordinator
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse as ManyCoordinators
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.handlers.endpoints import endpoint_seen, request_listener
from ingest.handlers.txn_common import refusal
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["handle", "FindCoordinatorRequest"]

FindCoordinatorRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    fc0.FindCoordinatorRequest,
    fc1.FindCoordinatorRequest,
    fc2.FindCoordinatorRequest,
    fc3.FindCoordinatorRequest,
    fc4.FindCoordinatorRequest,
]

_GROUP_KEY = 0
_TRANSACTION_KEY = 1
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _no_coordinator(key: str, code: ErrorCode, message: str) -> Coordinator:
    return Coordinator(
        key=key,
        node_id=BrokerId(-1),
        host="",
        port=i32(-1),
        error_code=code,
        error_message=message,
    )


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type == _TRANSACTION_KEY:
        refused = refusal(ctx, key)
        if refused is not None:
            return _no_coordinator(key, refused, "this broker cannot coordinate the transaction")
    elif key_type != _GROUP_KEY:
        return _no_coordinator(key, ErrorCode.invalid_request, f"unknown key type {key_type}")
    elif not key:
        return _no_coordinator(key, ErrorCode.invalid_group_id, "group id must not be empty")
    if (denied := acl.coordinator_denied(ctx, key, key_type)) is not None:
        return _no_coordinator(key, *denied)
    node = ctx.broker.cluster.coordinator_for(key).node_id
    coordinator = endpoint_seen(ctx, node)
    if coordinator is None:
        return _no_coordinator(
            key,
            ErrorCode.coordinator_not_available,
            f"the coordinator, node {node}, has no listener {request_listener(ctx)}",
        )
    return Coordinator(
        key=key,
        node_id=BrokerId(coordinator.node_id),
        host=coordinator.host,
        port=i32(coordinator.port),
        error_code=ErrorCode.none,
        error_message=None,
    )


async def handle(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> OneCoordinator | ManyCoordinators:
    key_type = int(getattr(request, "key_type", _GROUP_KEY))  # v1+
    if isinstance(request, fc4.FindCoordinatorRequest):
        return ManyCoordinators(
            throttle_time=_NO_THROTTLE,
            coordinators=tuple(_coordinator(ctx, k, key_type) for k in request.coordinator_keys),
        )
    c = _coordinator(ctx, request.key, key_type)
    return OneCoordinator(
        throttle_time=_NO_THROTTLE,
        error_code=c.error_code,
        error_message=c.error_message,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )
