"""What each Kafka API needs, checked from a handler in one call.

Every function answers True when the broker runs without an authorizer
(``broker.authorizer`` is None: today's behaviour, everyone may do
everything). The caller's principal is its connection's (``User:<name>``
after SASL, the certificate's principal on mTLS, ``User:ANONYMOUS``
otherwise) and its host the connection's peer address.

Per-API rules (Kafka's):

- Produce: WRITE on the topic (transactional: WRITE on the transactional id).
- Fetch, OffsetCommit/OffsetFetch topics: READ on the topic.
- Metadata, ListOffsets, OffsetForLeaderEpoch: DESCRIBE on the topic;
  Metadata leaves unauthorized topics out unless they were named.
- Auto-create and CreateTopics: CREATE on the cluster or the topic.
- DeleteTopics, DeleteRecords: DELETE on the topic; CreatePartitions: ALTER.
- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS
  / ALTER_CONFIGS on the topic or the cluster (broker configs).
- Group APIs: READ on the group; DescribeGroups DESCRIBE; DeleteGroups
  DELETE; ListGroups lists the groups the caller may DESCRIBE (all when it
  may DESCRIBE the cluster); FindCoordinator DESCRIBE on the group or the
  transactional id.
- InitProducerId: WRITE on the transactional id when there is one, else
  IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
- Reassignments, SCRAM credentials, ACLs: DESCRIBE / ALTER on the cluster.
  DescribeCluster is answered to everyone, as by a Kafka broker; its
  authorized operations are empty without DESCRIBE on the cluster.
- ApiVersions, SaslHandshake, SaslAuthenticate: nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ingest.protocol.errors import ErrorCode
from ingest.security.acl.model import AclOperation, ResourceType

if TYPE_CHECKING:
    from ingest.group.types import GroupDescription
    from ingest.handlers.base import RequestContext
    from ingest.security.acl.authorizer import Authorizer

__all__ = [
    "AclOperation",
    "ResourceType",
    "allowed",
    "authorize_cluster",
    "authorize_group",
    "authorize_topic",
    "authorize_transactional_id",
    "can_create_topic",
    "can_write_idempotently",
    "cluster_refusal",
    "config_denied",
    "coordinator_denied",
    "create_topic_denied",
    "enabled",
    "group_refusal",
    "described_groups",
    "group_denied",
    "groups_denied",
    "init_producer_id_denied",
    "listable_group",
    "metadata_denied",
    "principal",
    "produce_denied",
    "topic_denied",
    "topics_denied",
    "Denial",
]

Denial = tuple[ErrorCode, str]
"""The error code and message a refused item is answered with."""

_ANONYMOUS = "User:ANONYMOUS"


def _authorizer(ctx: RequestContext) -> Authorizer | None:
    return getattr(ctx.broker, "authorizer", None)


def enabled(ctx: RequestContext) -> bool:
    """Whether the broker checks ACLs."""
    return _authorizer(ctx) is not None


def principal(ctx: RequestContext) -> str:
    session = ctx.session
    return session.principal if session is not None else _ANONYMOUS


def allowed(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.authorize(principal(ctx), ctx.client_host, operation, resource_type, name)


def authorize_topic(ctx: RequestContext, topic: str, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.TOPIC, topic)


def authorize_group(ctx: RequestContext, group: str, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, group)


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, "kafka-cluster")


def authorize_transactional_id(
    ctx: RequestContext, transactional_id: str, operation: AclOperation = AclOperation.WRITE
) -> bool:
    """Whether the caller may use ``transactional_id`` for ``operation``:
    WRITE for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
    TxnOffsetCommit and transactional Produce; DESCRIBE for FindCoordinator
    and DescribeTransactions (implied by WRITE). On a denial, answer
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    return allowed(ctx, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def can_create_topic(ctx: RequestContext, topic: str) -> bool:
    """CREATE on the cluster or on the topic (CreateTopics, auto-create)."""
    return authorize_cluster(ctx, AclOperation.CREATE) or authorize_topic(
        ctx, topic, AclOperation.CREATE
    )


def can_write_idempotently(ctx: RequestContext) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 3's rule
    for InitProducerId without a transactional id)."""
    authorizer = _authorizer(ctx)
    if authorizer is None or authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE):
        return True
    return authorizer.may_on_some(
        principal(ctx), ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
    )


# --- answers for handlers: None when allowed, else what to answer ------------------
def topic_denied(ctx: RequestContext, topic: str, operation: AclOperation) -> Denial | None:
    if authorize_topic(ctx, topic, operation):
        return None
    return ErrorCode.topic_authorization_failed, _says(ctx, operation, "topic", topic)


def topics_denied(
    ctx: RequestContext,
    topics: Iterable[str],
    operation: AclOperation,
    group: str | None = None,
) -> dict[str, ErrorCode]:
    """The refused topics of a request and their error: every topic gets
    GROUP_AUTHORIZATION_FAILED when ``group`` may not be READ, else those
    that may not be ``operation``-ed get TOPIC_AUTHORIZATION_FAILED."""
    names = set(topics)
    if not enabled(ctx):
        return {}
    if group is not None and not authorize_group(ctx, group, AclOperation.READ):
        return dict.fromkeys(names, ErrorCode.group_authorization_failed)
    return {
        t: ErrorCode.topic_authorization_failed
        for t in names
        if not authorize_topic(ctx, t, operation)
    }


def produce_denied(ctx: RequestContext, transactional_id: str | None, topic: str) -> Denial | None:
    """Produce: WRITE on the transactional id (transactional producers), WRITE on the topic."""
    if transactional_id is not None and not authorize_transactional_id(ctx, transactional_id):
        return (
            ErrorCode.transactional_id_authorization_failed,
            _says(ctx, AclOperation.WRITE, "transactional id", transactional_id),
        )
    return topic_denied(ctx, topic, AclOperation.WRITE)


def create_topic_denied(ctx: RequestContext, topic: str) -> Denial | None:
    if can_create_topic(ctx, topic):
        return None
    return ErrorCode.topic_authorization_failed, _says(ctx, AclOperation.CREATE, "topic", topic)


def metadata_denied(ctx: RequestContext, topic: str, *, would_create: bool) -> Denial | None:
    """A topic named in Metadata: DESCRIBE, and CREATE when it would be auto-created."""
    if would_create:
        return create_topic_denied(ctx, topic)
    return topic_denied(ctx, topic, AclOperation.DESCRIBE)


def group_refusal(
    ctx: RequestContext, group: str, operation: AclOperation, **fields: Any
) -> Any | None:
    """The whole response (GROUP_AUTHORIZATION_FAILED, other fields from
    ``fields`` or zero) when the caller may not ``operation`` the group."""
    if authorize_group(ctx, group, operation):
        return None
    return ctx.response({"error_code": ErrorCode.group_authorization_failed, **fields})


def group_denied(ctx: RequestContext, group: str, operation: AclOperation) -> Denial | None:
    if authorize_group(ctx, group, operation):
        return None
    return ErrorCode.group_authorization_failed, _says(ctx, operation, "group", group)


def described_groups(ctx: RequestContext, groups: list[GroupDescription]) -> list[GroupDescription]:
    """DescribeGroups: a group the caller may not DESCRIBE is answered with
    GROUP_AUTHORIZATION_FAILED and nothing else about it."""
    return [
        g
        if authorize_group(ctx, g.group_id, AclOperation.DESCRIBE)
        else replace(
            g,
            error_code=int(ErrorCode.group_authorization_failed),
            state="",
            protocol_type="",
            protocol="",
            members=[],
        )
        for g in groups
    ]


def groups_denied(
    ctx: RequestContext, groups: Iterable[str], operation: AclOperation
) -> dict[str, ErrorCode]:
    return {
        g: ErrorCode.group_authorization_failed
        for g in groups
        if not authorize_group(ctx, g, operation)
    }


def listable_group(ctx: RequestContext, group: str) -> bool:
    """ListGroups shows every group to who may DESCRIBE the cluster, else
    the groups the caller may DESCRIBE."""
    return authorize_cluster(ctx, AclOperation.DESCRIBE) or authorize_group(
        ctx, group, AclOperation.DESCRIBE
    )


def cluster_refusal(ctx: RequestContext, operation: AclOperation, **fields: Any) -> Any | None:
    """The whole response (CLUSTER_AUTHORIZATION_FAILED) when the caller may
    not ``operation`` the cluster."""
    if authorize_cluster(ctx, operation):
        return None
    message = _says(ctx, operation, "cluster", "kafka-cluster")
    return ctx.response(
        {
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": message,
            **fields,
        }
    )


_GROUP_KEY, _TRANSACTION_KEY = 0, 1


def coordinator_denied(ctx: RequestContext, key: str, key_type: int) -> Denial | None:
    """FindCoordinator: DESCRIBE on the group or the transactional id."""
    if key_type == _TRANSACTION_KEY:
        if authorize_transactional_id(ctx, key, AclOperation.DESCRIBE):
            return None
        return (
            ErrorCode.transactional_id_authorization_failed,
            _says(ctx, AclOperation.DESCRIBE, "transactional id", key),
        )
    if authorize_group(ctx, key, AclOperation.DESCRIBE):
        return None
    return ErrorCode.group_authorization_failed, _says(ctx, AclOperation.DESCRIBE, "group", key)


def init_producer_id_denied(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """WRITE on the transactional id, or (idempotent producer) IDEMPOTENT_WRITE
    on the cluster or WRITE on some topic."""
    if transactional_id is not None:
        if authorize_transactional_id(ctx, transactional_id, AclOperation.WRITE):
            return None
        return ErrorCode.transactional_id_authorization_failed
    return None if can_write_idempotently(ctx) else ErrorCode.cluster_authorization_failed


_CONFIG_TOPIC, _CONFIG_BROKERS = 2, (4, 8)  # ConfigResource types: topic, broker, broker logger


def config_denied(
    ctx: RequestContext, config_resource_type: int, name: str, operation: AclOperation
) -> Denial | None:
    """Describe/Alter(Incremental)Configs: ``operation`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) on the topic, or on the cluster for broker configs."""
    if config_resource_type == _CONFIG_TOPIC:
        return topic_denied(ctx, name, operation)
    if config_resource_type in _CONFIG_BROKERS and not authorize_cluster(ctx, operation):
        return (
            ErrorCode.cluster_authorization_failed,
            _says(ctx, operation, "cluster", "kafka-cluster"),
        )
    return None


def _says(ctx: RequestContext, operation: AclOperation, kind: str, name: str) -> str:
    return f"{principal(ctx)} may not {operation.name} {kind} {name!r}"
