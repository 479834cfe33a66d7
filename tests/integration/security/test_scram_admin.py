"""DescribeUserScramCredentials / AlterUserScramCredentials through
confluent-kafka's admin client: super users only, Kafka's errors per user."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.integration.broker.rawkafka import RawClient
from tests.integration.security.conftest import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    SecureBroker,
)


def _admin(b: SecureBroker, user: str, password: str) -> AdminClient:
    return AdminClient(_conf(b, user, password))


def _conf(b: SecureBroker, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(b.pki.ca),
    }


def _can_connect(conf: dict[str, Any]) -> bool:
    errors: list[ck.KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=5)
        return True
    except ck.KafkaException:
        return False


def test_a_super_user_describes_every_users_mechanisms(secure_broker: SecureBroker) -> None:
    admin = _admin(secure_broker, ADMIN, ADMIN_PASSWORD)
    got = admin.describe_user_scram_credentials([USER])[USER].result(15)
    infos = {(i.mechanism, i.iterations) for i in got.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)}
    with pytest.raises(ck.KafkaException) as info:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(15)
    assert info.value.args[0].code() == ck.KafkaError.RESOURCE_NOT_FOUND


def test_others_get_cluster_authorization_failed(secure_broker: SecureBroker) -> None:
    admin = _admin(secure_broker, USER, PASSWORD)
    with pytest.raises(ck.KafkaException) as info:
        admin.describe_user_scram_credentials([USER])[USER].result(15)
    assert info.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    up = UserScramCredentialUpsertion(
        "eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"eve-pw"
    )
    with pytest.raises(ck.KafkaException) as info:
        admin.alter_user_scram_credentials([up])["eve"].result(15)
    assert info.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert not _can_connect(_conf(secure_broker, "eve", "eve-pw"))


def test_describing_all_users_without_rights_is_a_top_level_error(
    secure_broker: SecureBroker,
) -> None:
    """On the wire (confluent-kafka 2.16 crashes on a top-level error here)."""
    with RawClient(secure_broker.sasl_plaintext) as raw:
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 0
        auth = raw.request(36, 2, {"auth_bytes": f"\0{USER}\0{PASSWORD}".encode()})
        assert auth.error_code.value == 0
        resp = raw.request(50, 0, {"users": None})
        assert resp.error_code.value == 31  # CLUSTER_AUTHORIZATION_FAILED
        assert resp.results == ()


def test_a_super_user_creates_and_deletes_a_user_over_the_kafka_protocol(
    secure_broker: SecureBroker,
) -> None:
    admin = _admin(secure_broker, ADMIN, ADMIN_PASSWORD)
    up = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"dave-pw"
    )
    admin.alter_user_scram_credentials([up])["dave"].result(15)
    assert _can_connect(_conf(secure_broker, "dave", "dave-pw"))
    assert not _can_connect(_conf(secure_broker, "dave", "other"))
    too_few = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"x"
    )
    with pytest.raises(ck.KafkaException) as info:
        admin.alter_user_scram_credentials([too_few])["dave"].result(15)
    assert info.value.args[0].code() == ck.KafkaError.UNACCEPTABLE_CREDENTIAL
    gone = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([gone])["dave"].result(15)
    time.sleep(0)  # the next connection reads the store afresh
    assert not _can_connect(_conf(secure_broker, "dave", "dave-pw"))
    with pytest.raises(ck.KafkaException) as info:
        admin.alter_user_scram_credentials([gone])["dave"].result(15)
    assert info.value.args[0].code() == ck.KafkaError.RESOURCE_NOT_FOUND
