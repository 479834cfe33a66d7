"""Kafka clients over SASL_SSL (SCRAM-SHA-256/512), SASL_PLAINTEXT and mTLS;
wrong passwords, missing certificates and unauthenticated requests refused
with Kafka's errors; the PLAINTEXT listener unchanged."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.broker.rawkafka import RawClient
from tests.integration.security.conftest import PASSWORD, USER, SecureBroker, users_cli
from tests.support.sasl_refusals import assert_every_answered_attempt_refused

_COUNT = 50
_SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def _sasl_ssl(b: SecureBroker, mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
        "ssl.ca.location": str(b.pki.ca),
    }


def _mtls(b: SecureBroker) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.mtls,
        "security.protocol": "SSL",
        "ssl.ca.location": str(b.pki.ca),
        "ssl.certificate.location": str(b.pki.client_cert),
        "ssl.key.location": str(b.pki.client_key),
    }


def _confluent_round_trip(conf: dict[str, Any]) -> None:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer(conf)
    errors: list[Any] = []
    for i in range(_COUNT):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None] * _COUNT
    consumer = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < _COUNT and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(_COUNT)]


@pytest.mark.parametrize("mechanism", _SCRAM)
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl_with_scram(
    secure_broker: SecureBroker, mechanism: str
) -> None:
    _confluent_round_trip(_sasl_ssl(secure_broker, mechanism))


def test_confluent_kafka_over_sasl_plaintext_with_plain(secure_broker: SecureBroker) -> None:
    _confluent_round_trip(
        {
            "bootstrap.servers": secure_broker.sasl_plaintext,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
    )


def test_confluent_kafka_produces_and_consumes_over_mtls(secure_broker: SecureBroker) -> None:
    _confluent_round_trip(_mtls(secure_broker))


def test_plaintext_listener_is_unaffected(secure_broker: SecureBroker) -> None:
    _confluent_round_trip({"bootstrap.servers": secure_broker.plaintext})


def test_each_listener_advertises_its_own_address(secure_broker: SecureBroker) -> None:
    for conf, address in (
        ({"bootstrap.servers": secure_broker.plaintext}, secure_broker.plaintext),
        (_sasl_ssl(secure_broker, "SCRAM-SHA-256"), secure_broker.sasl_ssl),
        (_mtls(secure_broker), secure_broker.mtls),
    ):
        brokers = AdminClient(conf).list_topics(timeout=15).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [address]


def _confluent_error(conf: dict[str, Any]) -> ck.KafkaError:
    """The first error a producer reports while trying to connect."""
    errors: list[ck.KafkaError] = []
    producer = ck.Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "the client reported no error"
    return errors[0]


@pytest.mark.parametrize("mechanism", _SCRAM)
def test_wrong_password_gets_authentication_failed(
    secure_broker: SecureBroker, mechanism: str
) -> None:
    err = _confluent_error(_sasl_ssl(secure_broker, mechanism, "not-the-password"))
    assert err.code() == ck.KafkaError._AUTHENTICATION
    assert "Authentication failed" in err.str()


def test_mtls_listener_refuses_a_client_without_a_trusted_certificate(
    secure_broker: SecureBroker,
) -> None:
    conf = _mtls(secure_broker)
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    untrusted = {
        **conf,
        "ssl.certificate.location": str(secure_broker.pki.other_client_cert),
        "ssl.key.location": str(secure_broker.pki.other_client_key),
    }
    for c in (conf, untrusted):
        with pytest.raises(ck.KafkaException):  # the TLS handshake fails: no metadata
            AdminClient(c).list_topics(timeout=5)


@pytest.mark.parametrize("mechanism", _SCRAM)
def test_kafka_python_produces_and_consumes_over_sasl_ssl_with_scram(
    secure_broker: SecureBroker, mechanism: str
) -> None:
    _kafka_python_round_trip(
        secure_broker,
        {
            "bootstrap_servers": secure_broker.sasl_ssl,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": USER,
            "sasl_plain_password": PASSWORD,
            "ssl_cafile": str(secure_broker.pki.ca),
        },
    )


def test_kafka_python_produces_and_consumes_over_mtls(secure_broker: SecureBroker) -> None:
    _kafka_python_round_trip(
        secure_broker,
        {
            "bootstrap_servers": secure_broker.mtls,
            "security_protocol": "SSL",
            "ssl_cafile": str(secure_broker.pki.ca),
            "ssl_certfile": str(secure_broker.pki.client_cert),
            "ssl_keyfile": str(secure_broker.pki.client_key),
        },
    )


def _kafka_python_round_trip(b: SecureBroker, conf: dict[str, Any]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    try:
        futures = [producer.send(topic, f"v{i}".encode()) for i in range(_COUNT)]
        producer.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(_COUNT))
    finally:
        producer.close(5)
    consumer = KafkaConsumer(
        topic,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=15000,
        **conf,
    )
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == _COUNT:
                break
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(_COUNT)]


def test_kafka_python_wrong_password_gets_sasl_authentication_failed(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python retries the bootstrap until its timeout; every attempt the
    broker answers is refused with error 58, which it reports as
    SaslAuthenticationFailedError (the last one may be cut off by the client's
    own 3 s deadline instead)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaAdminClient(
            bootstrap_servers=secure_broker.sasl_ssl,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=USER,
            sasl_plain_password="wrong",
            ssl_cafile=str(secure_broker.pki.ca),
            bootstrap_timeout_ms=3000,
        )
    attempts = [r.getMessage() for r in caplog.records if "Bootstrap connection" in r.getMessage()]
    assert_every_answered_attempt_refused(attempts)


# --- the wire, as Kafka answers it ----------------------------------------------------------


def test_requests_before_authentication_close_the_connection(secure_broker: SecureBroker) -> None:
    with RawClient(secure_broker.sasl_plaintext) as raw:
        versions = raw.request(
            18, 3, {"client_software_name": "raw", "client_software_version": "1"}
        )
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        raw.send_frame(raw.encode(3, 9, {"topics": None, "allow_auto_topic_creation": False}))
        assert raw.is_closed_by_peer()


def test_unsupported_mechanism_lists_the_enabled_ones(secure_broker: SecureBroker) -> None:
    with RawClient(secure_broker.sasl_plaintext) as raw:
        resp = raw.request(17, 1, {"mechanism": "GSSAPI"})
        assert resp.error_code.value == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(resp.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


def test_wrong_password_answers_58_then_closes(secure_broker: SecureBroker) -> None:
    with RawClient(secure_broker.sasl_plaintext) as raw:
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 0
        resp = raw.request(36, 2, {"auth_bytes": f"\0{USER}\0wrong".encode()})
        assert resp.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert "invalid credentials" in resp.error_message
        assert raw.is_closed_by_peer()


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(secure_broker: SecureBroker) -> None:
    with RawClient(secure_broker.plaintext) as raw:
        assert raw.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 34


# --- tidelake users --------------------------------------------------------------------------


def test_users_created_and_deleted_with_the_cli_apply_to_the_next_connection(
    secure_broker: SecureBroker,
) -> None:
    made = users_cli(
        secure_broker.data_dir,
        "create",
        "carol",
        "--password",
        "carol-pw",
        "--mechanism",
        "SCRAM-SHA-512",
    )
    assert made.returncode == 0, made.stderr
    listed = users_cli(secure_broker.data_dir, "list")
    assert "carol" in listed.stdout and "SCRAM-SHA-512" in listed.stdout
    assert "carol-pw" not in listed.stdout
    conf = {
        **_sasl_ssl(secure_broker, "SCRAM-SHA-512"),
        "sasl.username": "carol",
        "sasl.password": "carol-pw",
    }
    assert AdminClient(conf).list_topics(timeout=15).brokers
    gone = users_cli(secure_broker.data_dir, "delete", "carol")
    assert gone.returncode == 0, gone.stderr
    assert users_cli(secure_broker.data_dir, "delete", "carol").returncode == 1
    assert _confluent_error(conf).code() == ck.KafkaError._AUTHENTICATION
