"""The operations a client may perform on a topic or the cluster, as the
32-bit bitfield that Metadata, DescribeCluster and DescribeGroups return
when asked.

Bit ``n`` stands for Kafka's ``AclOperation`` code ``n``. Without an
authorizer, as Kafka without one, every caller may do everything a resource
supports; with one, the operations the authorizer grants the caller.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.handlers.base import RequestContext

__all__ = [
    "AclOperation",
    "ResourceType",
    "NOT_INCLUDED",
    "authorized_operations",
    "operations_field",
]

NOT_INCLUDED = -(2**31)
"""The field's value when the client did not ask for authorized operations."""


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (the wire values)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes, for the resources these APIs describe."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


_SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
        }
    ),
}


def authorized_operations(
    ctx: RequestContext, resource: ResourceType, name: str
) -> frozenset[AclOperation]:
    """What the caller of ``ctx`` may do on ``resource`` ``name``.

    With no authorizer: every operation the resource type supports; with
    one, what it allows, or nothing without DESCRIBE.
    """
    from ingest.security.acl import enforce

    kind = enforce.ResourceType(int(resource))
    allowed = frozenset(
        op
        for op in _SUPPORTED[resource]
        if enforce.allowed(ctx, enforce.AclOperation(int(op)), kind, name)
    )
    # as Kafka: nothing is told about a resource the caller may not describe
    return allowed if AclOperation.DESCRIBE in allowed else frozenset()


def operations_field(ctx: RequestContext, resource: ResourceType, name: str, *, asked: bool) -> int:
    """The wire bitfield: the authorized operations, or NOT_INCLUDED when not asked."""
    if not asked:
        return NOT_INCLUDED
    bits = 0
    for op in authorized_operations(ctx, resource, name):
        bits |= 1 << op
    return bits
