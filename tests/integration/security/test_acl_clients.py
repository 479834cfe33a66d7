"""ACLs with real clients: one ``tidelake serve`` with ``authorizer = "acl"``,
a SASL_PLAINTEXT listener (alice, bob and the super user admin, SCRAM) and a
PLAINTEXT one (User:ANONYMOUS). confluent-kafka's and kafka-python's admin
clients create, describe and delete ACLs; a user without ACLs is refused with
Kafka's errors and does not see the topic; granting makes it work."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.security.certs import TestPki, make_pki
from tests.integration.security.conftest import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    SecureBroker,
    users_cli,
)
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

BOB, BOB_PASSWORD = "bob", "bob-secret-1"


@dataclass(frozen=True)
class AclBroker:
    proc: TidelakeProcess
    sasl: str
    plaintext: str
    data_dir: Path
    mtls: str
    pki: TestPki


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    root = tmp_path_factory.mktemp("acl")
    data = root / "data"
    data.mkdir()
    for user, password in ((USER, PASSWORD), (BOB, BOB_PASSWORD), (ADMIN, ADMIN_PASSWORD)):
        made = users_cli(data, "create", user, "--password", password)
        assert made.returncode == 0, made.stderr
    pki = make_pki(root / "pki")
    proc = TidelakeProcess(data)
    sasl, mtls = free_port(), free_port()
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[broker]
listeners = [
    "PLAINTEXT://127.0.0.1:{proc.kafka_port}",
    "SASL_PLAINTEXT://127.0.0.1:{sasl}",
    "MTLS://127.0.0.1:{mtls}",
]
listener_security_protocol_map = {{ MTLS = "SSL" }}
listener_ssl_client_auth = {{ MTLS = "required" }}
ssl_certfile = "{pki.server_cert}"
ssl_keyfile = "{pki.server_key}"
ssl_cafile = "{pki.ca}"
authorizer = "acl"
super_users = ["User:{ADMIN}"]
"""
    )
    proc.config_file = config
    proc.start()
    try:
        yield AclBroker(proc, f"127.0.0.1:{sasl}", proc.bootstrap, data, f"127.0.0.1:{mtls}", pki)
    finally:
        proc.stop()


def _conf(b: AclBroker, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.sasl,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def _admin(b: AclBroker, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> AdminClient:
    return AdminClient(_conf(b, user, password))


def _topic(b: AclBroker) -> str:
    name = f"acl-{uuid.uuid4().hex[:8]}"
    admin = _admin(b)  # kept alive until the result is in
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def _binding(
    kind: ResourceType,
    name: str,
    op: AclOperation,
    principal: str = f"User:{USER}",
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", op, permission)


def _grant(b: AclBroker, *bindings: AclBinding) -> None:
    admin = _admin(b)
    for f in admin.create_acls(list(bindings)).values():
        f.result(15)


def _produce(b: AclBroker, user: str, password: str, topic: str) -> ck.KafkaError | None:
    """Produce one record; the delivery error, or None."""
    outcome: list[ck.KafkaError | None] = []
    producer = ck.Producer({**_conf(b, user, password), "message.timeout.ms": 10000, "acks": "all"})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def _consume(b: AclBroker, user: str, password: str, topic: str, group: str) -> Any:
    """The first message or error a subscribed consumer gets."""
    consumer = ck.Consumer(
        {
            **_conf(b, user, password),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg
        return None
    finally:
        consumer.close()


def test_a_user_without_acls_can_neither_produce_nor_consume_nor_see_the_topic(
    acl_broker: AclBroker,
) -> None:
    topic = _topic(acl_broker)
    err = _produce(acl_broker, USER, PASSWORD, topic)
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the group may be used, the topic may not
    _grant(acl_broker, _binding(ResourceType.GROUP, "g-none", AclOperation.READ))
    msg = _consume(acl_broker, USER, PASSWORD, topic, "g-none")
    assert msg is not None and msg.error() is not None
    assert msg.error().code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = _admin(acl_broker, USER, PASSWORD).list_topics(timeout=10).topics
    assert topic not in listed
    assert topic in _admin(acl_broker).list_topics(timeout=10).topics  # the super user sees it


def test_granting_write_and_read_makes_produce_and_consume_work(acl_broker: AclBroker) -> None:
    topic = _topic(acl_broker)
    _grant(
        acl_broker,
        _binding(ResourceType.TOPIC, topic, AclOperation.WRITE),
        _binding(ResourceType.TOPIC, topic, AclOperation.READ),
        _binding(ResourceType.GROUP, "g-ok", AclOperation.READ),
    )
    assert _produce(acl_broker, USER, PASSWORD, topic) is None
    msg = _consume(acl_broker, USER, PASSWORD, topic, "g-ok")
    assert msg is not None and msg.error() is None and msg.value() == b"v"
    assert topic in _admin(acl_broker, USER, PASSWORD).list_topics(timeout=10).topics
    # bob, who has no ACL, is still refused
    err = _produce(acl_broker, BOB, BOB_PASSWORD, topic)
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_missing_group_acl_gives_group_authorization_failed(acl_broker: AclBroker) -> None:
    topic = _topic(acl_broker)
    _grant(acl_broker, _binding(ResourceType.TOPIC, topic, AclOperation.READ))
    msg = _consume(acl_broker, USER, PASSWORD, topic, "g-forbidden")
    assert msg is not None and msg.error() is not None
    assert msg.error().code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_prefixed_acls_and_deny_wins(acl_broker: AclBroker) -> None:
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    open_topic, secret = prefix + "orders", prefix + "secret"
    admin = _admin(acl_broker)
    for name in (open_topic, secret):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    _grant(
        acl_broker,
        _binding(
            ResourceType.TOPIC,
            prefix,
            AclOperation.WRITE,
            pattern=ResourcePatternType.PREFIXED,
        ),
        _binding(ResourceType.TOPIC, secret, AclOperation.WRITE, permission=AclPermissionType.DENY),
    )
    assert _produce(acl_broker, USER, PASSWORD, open_topic) is None
    err = _produce(acl_broker, USER, PASSWORD, secret)
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_admin_client_describes_and_deletes_acls(acl_broker: AclBroker) -> None:
    admin = _admin(acl_broker)
    name = f"described-{uuid.uuid4().hex[:6]}"
    mine = _binding(ResourceType.TOPIC, name, AclOperation.DESCRIBE, principal="User:carol")
    _grant(acl_broker, mine)
    any_topic = AclBindingFilter(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(any_topic).result(15) == [mine]
    deleted = admin.delete_acls([any_topic])[any_topic].result(15)
    assert deleted == [mine]
    assert admin.describe_acls(any_topic).result(15) == []


def test_only_who_may_alter_the_cluster_manages_acls(acl_broker: AclBroker) -> None:
    user_admin = _admin(acl_broker, BOB, BOB_PASSWORD)
    binding = _binding(ResourceType.TOPIC, "t", AclOperation.READ, principal=f"User:{BOB}")
    with pytest.raises(ck.KafkaException) as info:
        user_admin.create_acls([binding])[binding].result(15)
    assert info.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    # librdkafka does not surface DescribeAcls' top-level error: bob sees nothing
    _grant(acl_broker, _binding(ResourceType.TOPIC, "seen-by-admin", AclOperation.READ))
    assert user_admin.describe_acls(every).result(15) == []
    assert _admin(acl_broker).describe_acls(every).result(15) != []


def test_anonymous_plaintext_clients_see_no_topic_and_cannot_create_one(
    acl_broker: AclBroker,
) -> None:
    topic = _topic(acl_broker)
    anonymous = AdminClient({"bootstrap.servers": acl_broker.plaintext})
    assert topic not in anonymous.list_topics(timeout=10).topics
    with pytest.raises(ck.KafkaException) as info:
        anonymous.create_topics([NewTopic("anon-made", 1, 1)])["anon-made"].result(15)
    assert info.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_admin_manages_acls(acl_broker: AclBroker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import (
        ACLResourcePatternType as KPattern,
    )
    from kafka.admin import (
        ResourceType as KResource,
    )
    from kafka.errors import ClusterAuthorizationFailedError

    admin = KafkaAdminClient(
        bootstrap_servers=acl_broker.sasl,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=ADMIN,
        sasl_plain_password=ADMIN_PASSWORD,
    )
    try:
        group = f"kp-{uuid.uuid4().hex[:6]}"
        acl = ACL(
            f"User:{BOB}",
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(KResource.GROUP, group, KPattern.LITERAL),
        )
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        selector = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KResource.GROUP, group, KPattern.ANY),
        )
        found, error = admin.describe_acls(selector)
        assert error.errno == 0
        assert [(a.principal, a.operation) for a in found] == [(f"User:{BOB}", ACLOperation.READ)]
        deleted = admin.delete_acls([selector])
        _, matched, error = deleted[0]
        assert error.errno == 0 and [a.principal for a in matched] == [f"User:{BOB}"]
        assert admin.describe_acls(selector)[0] == []
    finally:
        admin.close()
    bob = KafkaAdminClient(
        bootstrap_servers=acl_broker.sasl,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=BOB,
        sasl_plain_password=BOB_PASSWORD,
    )
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(selector)
    finally:
        bob.close()


def test_without_an_authorizer_acl_apis_answer_security_disabled(
    secure_broker: SecureBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": secure_broker.plaintext})
    binding = _binding(ResourceType.TOPIC, "t", AclOperation.READ)
    with pytest.raises(ck.KafkaException) as info:
        admin.create_acls([binding])[binding].result(15)
    assert info.value.args[0].code() == ck.KafkaError.SECURITY_DISABLED


def test_acls_added_by_the_cli_apply_to_the_running_broker_within_two_seconds(
    acl_broker: AclBroker,
) -> None:
    """The CLI writes the metadata store as another broker would: the running
    broker's authorizer polls the store's ACL version and reloads."""
    import subprocess
    import sys

    from tests.integration.security.conftest import ROOT

    topic = _topic(acl_broker)
    assert topic not in _admin(acl_broker, BOB, BOB_PASSWORD).list_topics(timeout=10).topics
    added = subprocess.run(
        [sys.executable, "-m", "api.cli", "acls", "add", "--allow", f"User:{BOB}",
         "--operation", "describe", "--topic", topic, "--data-dir", str(acl_broker.data_dir)],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    started = time.monotonic()
    bob = _admin(acl_broker, BOB, BOB_PASSWORD)
    while topic not in bob.list_topics(timeout=10).topics:
        assert time.monotonic() - started < 2.5, "the broker did not see the new ACL"
        time.sleep(0.1)


def test_describe_cluster_is_answered_to_everyone_with_only_the_allowed_operations(
    acl_broker: AclBroker,
) -> None:
    bob = _admin(acl_broker, BOB, BOB_PASSWORD)
    seen = bob.describe_cluster(include_authorized_operations=True).result(15)
    assert seen.cluster_id and seen.nodes
    assert not seen.authorized_operations  # no DESCRIBE on the cluster: nothing is told
    admin = _admin(acl_broker)
    described = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert AclOperation.ALTER in described.authorized_operations


def test_a_super_user_produces_and_consumes_without_any_acl(acl_broker: AclBroker) -> None:
    topic = _topic(acl_broker)
    assert _produce(acl_broker, ADMIN, ADMIN_PASSWORD, topic) is None
    msg = _consume(acl_broker, ADMIN, ADMIN_PASSWORD, topic, "g-admin")
    assert msg is not None and msg.error() is None and msg.value() == b"v"


def test_an_mtls_client_is_authorized_as_its_certificates_principal(acl_broker: AclBroker) -> None:
    mine, other = _topic(acl_broker), _topic(acl_broker)
    # the client certificate's CN is alice-app (tests/integration/security/certs.py)
    _grant(
        acl_broker,
        _binding(ResourceType.TOPIC, mine, AclOperation.WRITE, principal="User:alice-app"),
    )
    client = AdminClient(
        {
            "bootstrap.servers": acl_broker.mtls,
            "security.protocol": "SSL",
            "ssl.ca.location": str(acl_broker.pki.ca),
            "ssl.certificate.location": str(acl_broker.pki.client_cert),
            "ssl.key.location": str(acl_broker.pki.client_key),
        }
    )
    listed = client.list_topics(timeout=10).topics
    assert mine in listed and other not in listed  # WRITE implies DESCRIBE
