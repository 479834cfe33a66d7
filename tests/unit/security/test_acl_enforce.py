"""The per-API rules handlers call (ingest/security/acl/enforce.py), over a
real authorizer and a request context without a server."""

from __future__ import annotations

import types

import pytest

from ingest.group.types import GroupDescription
from ingest.handlers.authorized_operations import ResourceType as OpsResource
from ingest.handlers.authorized_operations import operations_field
from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    MemoryAclStore,
    PatternType,
    ResourceType,
)
from ingest.security.acl import enforce as acl

Op = AclOperation


def _ctx(
    *bindings: AclBinding,
    principal: str = "User:alice",
    api_key: int = 3,
    version: int = 12,
    authorizer: bool = True,
) -> RequestContext:
    store = MemoryAclStore()
    for b in bindings:
        store.add(b)
    broker = types.SimpleNamespace(
        authorizer=Authorizer(store, ["User:admin"]) if authorizer else None, acls=store
    )
    session = types.SimpleNamespace(principal=principal)
    return RequestContext(broker, api_key, version, 1, "test", "10.0.0.1", session)  # type: ignore[arg-type]


def _allow(
    kind: ResourceType, name: str, op: Op, pattern: PatternType = PatternType.LITERAL
) -> AclBinding:
    return AclBinding(kind, name, pattern, "User:alice", "*", op, AclPermissionType.ALLOW)


def test_without_an_authorizer_everything_is_allowed() -> None:
    ctx = _ctx(authorizer=False)
    assert not acl.enabled(ctx)
    assert acl.topic_denied(ctx, "t", Op.DELETE) is None
    assert acl.init_producer_id_denied(ctx, "tid") is None
    assert acl.cluster_refusal(ctx, Op.ALTER) is None
    assert operations_field(ctx, OpsResource.TOPIC, "t", asked=True) == sum(
        1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)
    )


def test_topic_denials_carry_topic_authorization_failed() -> None:
    ctx = _ctx(_allow(ResourceType.TOPIC, "t", Op.READ))
    assert acl.topic_denied(ctx, "t", Op.READ) is None
    assert acl.topic_denied(ctx, "t", Op.DESCRIBE) is None  # implied by READ
    denied = acl.topic_denied(ctx, "t", Op.WRITE)
    assert denied is not None and denied[0] == ErrorCode.topic_authorization_failed
    assert "User:alice" in denied[1]


def test_metadata_needs_create_only_for_topics_it_would_create() -> None:
    ctx = _ctx(_allow(ResourceType.TOPIC, "new-", Op.CREATE, PatternType.PREFIXED))
    assert acl.metadata_denied(ctx, "new-topic", would_create=True) is None
    assert acl.metadata_denied(ctx, "other", would_create=True) is not None
    assert acl.metadata_denied(ctx, "new-topic", would_create=False) is not None  # no DESCRIBE
    cluster_create = _ctx(_allow(ResourceType.CLUSTER, "kafka-cluster", Op.CREATE))
    assert acl.create_topic_denied(cluster_create, "anything") is None


def test_produce_needs_write_on_the_topic_and_on_the_transactional_id() -> None:
    ctx = _ctx(_allow(ResourceType.TOPIC, "t", Op.WRITE))
    assert acl.produce_denied(ctx, None, "t") is None
    denied = acl.produce_denied(ctx, "tx-1", "t")
    assert denied is not None and denied[0] == ErrorCode.transactional_id_authorization_failed
    both = _ctx(_allow(ResourceType.TOPIC, "t", Op.WRITE), _allow(ResourceType.TRANSACTIONAL_ID, "tx-", Op.WRITE, PatternType.PREFIXED))  # fmt: skip
    assert acl.produce_denied(both, "tx-1", "t") is None


def test_init_producer_id_rules() -> None:
    nothing = _ctx()
    assert acl.init_producer_id_denied(nothing, None) == ErrorCode.cluster_authorization_failed
    assert (
        acl.init_producer_id_denied(nothing, "tx")
        == ErrorCode.transactional_id_authorization_failed
    )
    some_topic = _ctx(_allow(ResourceType.TOPIC, "t", Op.WRITE))
    assert acl.init_producer_id_denied(some_topic, None) is None
    idempotent = _ctx(_allow(ResourceType.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE))
    assert acl.init_producer_id_denied(idempotent, None) is None
    tx = _ctx(_allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE))
    assert acl.init_producer_id_denied(tx, "tx") is None
    assert acl.authorize_transactional_id(tx, "tx", Op.DESCRIBE)  # implied by WRITE


def test_find_coordinator_needs_describe_on_the_group_or_transactional_id() -> None:
    ctx = _ctx(_allow(ResourceType.GROUP, "g", Op.READ))
    assert acl.coordinator_denied(ctx, "g", 0) is None
    denied = acl.coordinator_denied(ctx, "h", 0)
    assert denied is not None and denied[0] == ErrorCode.group_authorization_failed
    denied = acl.coordinator_denied(ctx, "g", 1)
    assert denied is not None and denied[0] == ErrorCode.transactional_id_authorization_failed


def test_configs_of_brokers_need_the_cluster_and_of_topics_the_topic() -> None:
    ctx = _ctx(_allow(ResourceType.TOPIC, "t", Op.ALTER_CONFIGS))
    assert acl.config_denied(ctx, 2, "t", Op.DESCRIBE_CONFIGS) is None
    assert acl.config_denied(ctx, 2, "u", Op.DESCRIBE_CONFIGS) is not None
    denied = acl.config_denied(ctx, 4, "1", Op.DESCRIBE_CONFIGS)
    assert denied is not None and denied[0] == ErrorCode.cluster_authorization_failed


def test_groups_listed_and_described_only_when_describable() -> None:
    ctx = _ctx(_allow(ResourceType.GROUP, "mine", Op.DESCRIBE))
    assert acl.listable_group(ctx, "mine") and not acl.listable_group(ctx, "theirs")
    admin = _ctx(principal="User:admin")
    assert acl.listable_group(admin, "theirs")
    described = acl.described_groups(
        ctx,
        [
            GroupDescription(0, "mine", "Stable", "consumer", "range"),
            GroupDescription(0, "theirs", "Stable", "consumer", "range"),
        ],
    )
    assert [(g.group_id, g.error_code, g.state) for g in described] == [
        ("mine", 0, "Stable"),
        ("theirs", int(ErrorCode.group_authorization_failed), ""),
    ]
    assert acl.groups_denied(ctx, ["mine", "theirs"], Op.DELETE) == {
        "mine": ErrorCode.group_authorization_failed,
        "theirs": ErrorCode.group_authorization_failed,
    }


def test_whole_request_refusals_are_typed_responses_of_the_api() -> None:
    join = _ctx(api_key=11, version=9)
    refused = acl.group_refusal(join, "g", Op.READ, generation_id=-1)
    assert type(refused).__name__ == "JoinGroupResponse"
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert refused.generation_id == -1
    cluster = _ctx(api_key=46, version=0)
    refused = acl.cluster_refusal(cluster, Op.DESCRIBE)
    assert type(refused).__name__ == "ListPartitionReassignmentsResponse"
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert (
        acl.cluster_refusal(_ctx(api_key=46, version=0, principal="User:admin"), Op.ALTER) is None
    )


@pytest.mark.parametrize("asked", [True, False])
def test_authorized_operations_come_from_the_authorizer(asked: bool) -> None:
    ctx = _ctx(_allow(ResourceType.TOPIC, "t", Op.READ), _allow(ResourceType.GROUP, "g", Op.ALL))
    bits = operations_field(ctx, OpsResource.TOPIC, "t", asked=asked)
    if not asked:
        assert bits == -(2**31)
        return
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    group_bits = operations_field(ctx, OpsResource.GROUP, "g", asked=True)
    assert group_bits == (1 << Op.READ) | (1 << Op.DELETE) | (1 << Op.DESCRIBE)
    assert operations_field(ctx, OpsResource.CLUSTER, "c", asked=True) == 0
    # without DESCRIBE nothing is told, whatever else is allowed
    create_only = _ctx(_allow(ResourceType.TOPIC, "t", Op.CREATE))
    assert operations_field(create_only, OpsResource.TOPIC, "t", asked=True) == 0
