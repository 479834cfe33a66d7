"""KIP-368 re-authentication on a real ``tidelake serve`` with
``connections_max_reauth_ms`` small: SaslAuthenticate tells the client its
session lifetime; clients that re-authenticate (confluent-kafka, kafka-python)
keep working on the same connection across several re-authentications; a
client that does not is disconnected at its next request after expiry; a
re-authentication may not change the principal."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest

from tests.integration.broker.rawkafka import RawClient
from tests.integration.security.test_oauthbearer import (
    OAuthBroker,
    confluent_conf,
    start_oauth_broker,
)
from tests.unit.security.oauth_keys import initial_response

REAUTH_MS = 1500
_METADATA = {"topics": None, "allow_auto_topic_creation": False}


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    b = start_oauth_broker(tmp_path_factory.mktemp("reauth"), reauth_ms=REAUTH_MS)
    try:
        yield b
    finally:
        b.proc.stop()


def _login(raw: RawClient, token: str) -> Any:
    assert raw.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code.value == 0
    return raw.request(36, 1, {"auth_bytes": initial_response(token)})


def test_the_session_lifetime_is_sent_and_an_expired_session_is_closed(
    reauth_broker: OAuthBroker,
) -> None:
    with RawClient(reauth_broker.sasl_plaintext) as raw:
        resp = _login(raw, reauth_broker.key.token("carol"))
        assert resp.error_code.value == 0
        lifetime_ms = resp.session_lifetime.total_seconds() * 1000
        assert 0 < lifetime_ms <= REAUTH_MS
        assert raw.request(3, 9, _METADATA).brokers  # served while the session lasts
        time.sleep(lifetime_ms / 1000 + 0.3)
        raw.send_frame(raw.encode(3, 9, _METADATA))
        assert raw.is_closed_by_peer()


def test_reauthenticating_on_the_same_connection_keeps_it_open(
    reauth_broker: OAuthBroker,
) -> None:
    with RawClient(reauth_broker.sasl_plaintext) as raw:
        assert _login(raw, reauth_broker.key.token("carol")).error_code.value == 0
        for _ in range(3):
            time.sleep(REAUTH_MS / 1000 * 0.6)
            again = _login(raw, reauth_broker.key.token("carol"))  # a fresh token
            assert again.error_code.value == 0
            assert raw.request(3, 9, _METADATA).brokers
        # well past the first session's end: the connection is still served
        assert raw.request(3, 9, _METADATA).brokers


def test_reauthentication_may_not_change_the_principal(reauth_broker: OAuthBroker) -> None:
    with RawClient(reauth_broker.sasl_plaintext) as raw:
        assert _login(raw, reauth_broker.key.token("carol")).error_code.value == 0
        other = _login(raw, reauth_broker.key.token("mallory"))
        assert other.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in other.error_message
        assert raw.is_closed_by_peer()


def test_reauthentication_may_not_change_the_mechanism(reauth_broker: OAuthBroker) -> None:
    with RawClient(reauth_broker.sasl_plaintext) as raw:
        assert _login(raw, reauth_broker.key.token("carol")).error_code.value == 0
        assert raw.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code.value == 34
        assert raw.is_closed_by_peer()


def test_confluent_kafka_keeps_producing_across_reauthentications(
    reauth_broker: OAuthBroker,
) -> None:
    principal = f"User:svc-{uuid.uuid4().hex[:6]}"
    subject = principal.removeprefix("User:")
    conf = confluent_conf(
        reauth_broker, lambda: (reauth_broker.key.token(subject), time.time() + 300)
    )
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    errors: list[Any] = []
    producer = ck.Producer({**conf, "error_cb": errors.append})
    delivered: list[Any] = []
    deadline = time.monotonic() + 6 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.produce(topic, f"v{sent}".encode(), on_delivery=lambda e, m: delivered.append(e))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert delivered == [None] * sent
    assert errors == []  # librdkafka reports a dropped connection here: there was none
    assert reauth_broker.reauth_count(principal) >= 3, reauth_broker.proc.log_tail()


def test_kafka_python_keeps_producing_across_reauthentications(
    reauth_broker: OAuthBroker,
) -> None:
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    subject = f"kp-{uuid.uuid4().hex[:6]}"

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return reauth_broker.key.token(subject)

    producer = KafkaProducer(
        bootstrap_servers=reauth_broker.sasl_plaintext,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
    )
    topic = f"kp-reauth-{uuid.uuid4().hex[:8]}"
    try:
        deadline = time.monotonic() + 5 * REAUTH_MS / 1000
        while time.monotonic() < deadline:
            producer.send(topic, b"x").get(timeout=10)
            time.sleep(0.1)
    finally:
        producer.close()
    assert reauth_broker.reauth_count(f"User:{subject}") >= 2, reauth_broker.proc.log_tail()


def test_aiokafka_which_does_not_reauthenticate_reconnects_after_its_session_ends(
    reauth_broker: OAuthBroker,
) -> None:
    """aiokafka has no KIP-368 support: the broker closes its connection at
    the first request after the session ended; it connects again and its
    sends still succeed."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return reauth_broker.key.token("aio")

    async def run() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=reauth_broker.sasl_plaintext,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(),
        )
        await producer.start()
        topic = f"aio-reauth-{uuid.uuid4().hex[:8]}"
        sent = 0
        try:
            deadline = time.monotonic() + 3 * REAUTH_MS / 1000
            while time.monotonic() < deadline:
                await producer.send_and_wait(topic, b"x")
                sent += 1
                await asyncio.sleep(0.2)
        finally:
            await producer.stop()
        return sent

    log_before = reauth_broker.proc.log_path.read_text(errors="replace")
    assert asyncio.run(run()) > 5
    log_after = reauth_broker.proc.log_path.read_text(errors="replace")[len(log_before) :]
    assert "SASL session expired without re-authentication" in log_after
