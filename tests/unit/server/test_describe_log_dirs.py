"""DescribeLogDirs needs DESCRIBE on the cluster, as Kafka asks: without it
the answer lists no directory and says CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import types

from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

from ingest.handlers.base import RequestContext
from ingest.handlers.describe_log_dirs import LOG_DIR, handle
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import Authorizer, MemoryAclStore


def _ctx(principal: str) -> RequestContext:
    logs = types.SimpleNamespace(topics={}, partition=lambda topic, index: None)
    broker = types.SimpleNamespace(
        authorizer=Authorizer(MemoryAclStore(), ["User:admin"]), acls=None, logs=logs
    )
    session = types.SimpleNamespace(principal=principal)
    return RequestContext(broker, 35, 4, 1, "test", "10.0.0.1", session)  # type: ignore[arg-type]


async def test_describe_log_dirs_needs_describe_on_the_cluster() -> None:
    denied = await handle(_ctx("User:alice"), DescribeLogDirsRequest(topics=None))
    assert denied.error_code == ErrorCode.cluster_authorization_failed and denied.results == ()
    allowed = await handle(_ctx("User:admin"), DescribeLogDirsRequest(topics=None))
    assert allowed.error_code == ErrorCode.none
    assert [(r.log_dir, r.topics) for r in allowed.results] == [(LOG_DIR, ())]
