"""DescribeLogDirs (key 35): the size of each partition this broker leads.

A Tidelake broker keeps no partition on its own disks: the S3Stream engine
stores every stream in object storage (the local write-ahead log holds only
what is not uploaded yet). So a broker answers with one logical log
directory, ``s3stream``, holding the partitions it leads, each with its
retained bytes; partitions led by other brokers are left out, as Kafka
leaves out the partitions a broker does not host. Total and usable bytes
(v4) are -1: object storage has no fixed capacity.

Needs DESCRIBE on the cluster (Kafka's rule); without it the answer lists
no directory and, from v3, says CLUSTER_AUTHORIZATION_FAILED.

Built as a version 4 entity; the dispatcher narrows it for older versions.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.describe_log_dirs import v1, v2, v3, v4
from kio.schema.describe_log_dirs.v4.response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.handlers.base import RequestContext
from ingest.log.partition import PartitionLog
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl

__all__ = ["LOG_DIR", "DescribeLogDirsRequest", "handle"]

DescribeLogDirsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v1.DescribeLogDirsRequest,
    v2.DescribeLogDirsRequest,
    v3.DescribeLogDirsRequest,
    v4.DescribeLogDirsRequest,
]

LOG_DIR = "s3stream"
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_UNKNOWN = i64(-1)


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not acl.authorize_cluster(ctx, acl.AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    logs = ctx.broker.logs
    wanted: list[tuple[str, list[PartitionLog]]] = []
    if request.topics is None:  # every partition led here
        for name, topic in sorted(logs.topics.items()):
            led = [topic.logs[i] for i in sorted(topic.logs)]
            if led:
                wanted.append((name, led))
    else:
        for t in request.topics:
            led = [
                plog
                for p in sorted({int(p) for p in t.partitions})
                if (plog := logs.partition(str(t.topic), p)) is not None
            ]
            if led:
                wanted.append((str(t.topic), led))
    topics = []
    for name, led in wanted:
        topics.append(
            DescribeLogDirsTopic(
                name=TopicName(name),
                partitions=tuple(
                    [
                        DescribeLogDirsPartition(
                            partition_index=i32(plog.partition),
                            partition_size=i64(await plog.retained_bytes()),
                            offset_lag=i64(0),
                            is_future_key=False,
                        )
                        for plog in led
                    ]
                ),
            )
        )
    return DescribeLogDirsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        results=(
            DescribeLogDirsResult(
                error_code=ErrorCode.none,
                log_dir=LOG_DIR,
                topics=tuple(topics),
                total_bytes=_UNKNOWN,
                usable_bytes=_UNKNOWN,
            ),
        ),
    )
