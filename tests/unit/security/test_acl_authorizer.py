"""The authorizer's rules, as Kafka's StandardAuthorizer applies them."""

from __future__ import annotations

import pytest

from ingest.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    InvalidAcl,
    MemoryAclStore,
    PatternType,
    ResourceType,
)
from ingest.security.acl.model import binding_from_codes, implied_by

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def _auth(*bindings: AclBinding, **kw: object) -> Authorizer:
    store = MemoryAclStore()
    for b in bindings:
        store.add(b)
    return Authorizer(store, **kw)  # type: ignore[arg-type]


def _allow(name: str, op: Op, principal: str = "User:alice", **kw: object) -> AclBinding:
    return AclBinding(
        kw.get("kind", TOPIC),  # type: ignore[arg-type]
        name,
        kw.get("pattern", LITERAL),  # type: ignore[arg-type]
        principal,
        str(kw.get("host", "*")),
        op,
        ALLOW,
    )


def _deny(name: str, op: Op, principal: str = "User:alice", **kw: object) -> AclBinding:
    b = _allow(name, op, principal, **kw)
    return AclBinding(
        b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, op, DENY
    )


def test_no_binding_means_denied_by_default() -> None:
    assert not _auth().authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "orders")


def test_allow_everyone_if_no_acl_found_opens_only_resources_without_bindings() -> None:
    auth = _auth(_allow("orders", Op.READ, "User:bob"), allow_everyone_if_no_acl_found=True)
    assert auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "other")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "orders")


def test_literal_allow_grants_only_that_operation_principal_and_name() -> None:
    auth = _auth(_allow("orders", Op.READ))
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert not auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "orders")
    assert not auth.authorize("User:bob", "h", Op.READ, TOPIC, "orders")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "orders2")
    assert not auth.authorize("User:alice", "h", Op.READ, GROUP, "orders")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_describe_is_implied_by_read_write_delete_alter_and_all(granted: Op) -> None:
    assert _auth(_allow("t", granted)).authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")


def test_describe_configs_is_implied_by_alter_configs_but_not_the_reverse() -> None:
    auth = _auth(_allow("t", Op.ALTER_CONFIGS), _allow("u", Op.DESCRIBE_CONFIGS))
    assert auth.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.ALTER_CONFIGS, TOPIC, "u")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "u")
    assert implied_by(Op.READ) == {Op.READ, Op.ALL}


def test_deny_wins_over_allow() -> None:
    auth = _auth(_allow("t", Op.ALL, "User:*"), _deny("t", Op.WRITE))
    assert not auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert auth.authorize("User:bob", "h", Op.WRITE, TOPIC, "t")


def test_deny_of_describe_does_not_deny_read_but_deny_all_denies_everything() -> None:
    auth = _auth(_allow("t", Op.READ), _deny("t", Op.DESCRIBE))
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    auth = _auth(_allow("t", Op.READ), _deny("t", Op.ALL, host="10.0.0.9"))
    assert not auth.authorize("User:alice", "10.0.0.9", Op.READ, TOPIC, "t")
    assert auth.authorize("User:alice", "10.0.0.8", Op.READ, TOPIC, "t")


def test_prefixed_patterns_match_names_that_start_with_them() -> None:
    auth = _auth(_allow("app-", Op.WRITE, pattern=PREFIXED), _deny("app-secret", Op.WRITE))
    assert auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "app-orders")
    assert auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "app-")
    assert not auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "ap")
    assert not auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "app-secret")
    assert auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "app-secrets")  # literal deny only


def test_wildcard_name_principal_and_host() -> None:
    auth = _auth(_allow("*", Op.READ, "User:*", host="*"))
    assert auth.authorize("User:anyone", "9.9.9.9", Op.READ, TOPIC, "whatever")
    host_bound = _auth(_allow("t", Op.READ, host="10.0.0.1"))
    assert host_bound.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not host_bound.authorize("User:alice", "10.0.0.2", Op.READ, TOPIC, "t")


def test_super_users_may_do_everything_even_against_a_deny() -> None:
    auth = _auth(_deny("t", Op.ALL, "User:admin"), super_users=["User:admin"])
    assert auth.authorize("User:admin", "h", Op.DELETE, TOPIC, "t")
    assert auth.authorize("User:admin", "h", Op.ALTER, CLUSTER, "kafka-cluster")
    assert not auth.authorize("User:alice", "h", Op.DELETE, TOPIC, "t")


def test_cluster_acls_name_kafka_cluster() -> None:
    auth = _auth(_allow("kafka-cluster", Op.CREATE, kind=CLUSTER))
    assert auth.authorize("User:alice", "h", Op.CREATE, CLUSTER, "any-cluster-id")
    with pytest.raises(InvalidAcl):
        _allow("my-cluster", Op.CREATE, kind=CLUSTER).validate()


def test_cache_reloads_only_after_refresh_when_the_store_changed() -> None:
    store = MemoryAclStore()
    auth = Authorizer(store)
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    store.add(_allow("t", Op.READ))
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")  # cached
    assert auth.refresh() is True
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert auth.refresh() is False
    store.remove(AclBindingFilter())
    auth.refresh()
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_may_on_some_topic_for_idempotent_producers() -> None:
    auth = _auth(_allow("app-", Op.WRITE, pattern=PREFIXED))
    assert auth.may_on_some("User:alice", "h", Op.WRITE, TOPIC)
    assert not auth.may_on_some("User:bob", "h", Op.WRITE, TOPIC)
    denied = _auth(_allow("app-", Op.WRITE, pattern=PREFIXED), _deny("*", Op.WRITE))
    assert not denied.may_on_some("User:alice", "h", Op.WRITE, TOPIC)


@pytest.mark.parametrize(
    "codes",
    [
        (1, "t", 3, "User:a", "*", 3, 3),  # resource type ANY
        (2, "t", 2, "User:a", "*", 3, 3),  # pattern MATCH
        (2, "t", 3, "User:a", "*", 1, 3),  # operation ANY
        (2, "t", 3, "User:a", "*", 3, 1),  # permission ANY
        (2, "t", 3, "alice", "*", 3, 3),  # principal without a type
        (2, "", 3, "User:a", "*", 3, 3),  # empty name
    ],
)
def test_bindings_that_cannot_be_stored_are_invalid(
    codes: tuple[int, str, int, str, str, int, int],
) -> None:
    with pytest.raises(InvalidAcl):
        binding_from_codes(*codes).validate()


def test_unknown_codes_are_invalid() -> None:
    with pytest.raises(InvalidAcl):
        binding_from_codes(99, "t", 3, "User:a", "*", 3, 3)
    with pytest.raises(InvalidAcl):
        AclBindingFilter(operation=Op.UNKNOWN).validate()
