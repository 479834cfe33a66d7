"""SASL OAUTHBEARER on a real ``tidelake serve``: the test is the identity
provider (it signs JWTs with keys whose JWKS the broker reads from a file),
and confluent-kafka, kafka-python and aiokafka authenticate with them; an
expired token and a token signed by another key get
SASL_AUTHENTICATION_FAILED. Also aiokafka over SASL_SSL with SCRAM and mTLS
on the shared secure broker."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from tests.integration.broker.rawkafka import RawClient
from tests.integration.security import certs
from tests.integration.security.conftest import PASSWORD, USER, SecureBroker
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess
from tests.unit.security.oauth_keys import (
    AUDIENCE,
    ISSUER,
    SigningKey,
    initial_response,
    jwks,
    rsa_key,
)

_COUNT = 30


@dataclass(frozen=True)
class OAuthBroker:
    proc: TidelakeProcess
    pki: certs.TestPki
    key: SigningKey
    sasl_plaintext: str
    sasl_ssl: str

    def reauth_count(self, principal: str) -> int:
        text = self.proc.log_path.read_text(errors="replace")
        return text.count(f"re-authenticated {principal} with OAUTHBEARER")


def start_oauth_broker(root: Path, reauth_ms: int = 0) -> OAuthBroker:
    """A broker with OAUTHBEARER (and SCRAM) on a SASL_PLAINTEXT and a SASL_SSL listener."""
    pki = certs.make_pki(root / "pki")
    key = rsa_key("test-rsa")
    jwks_file = root / "jwks.json"
    jwks_file.write_text(json.dumps(jwks(key)))
    data = root / "data"
    data.mkdir()
    proc = TidelakeProcess(data)
    plain, tls = free_port(), free_port()
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[broker]
listeners = [
    "PLAINTEXT://127.0.0.1:{proc.kafka_port}",
    "SASL_PLAINTEXT://127.0.0.1:{plain}",
    "SASL_SSL://127.0.0.1:{tls}",
]
ssl_certfile = "{pki.server_cert}"
ssl_keyfile = "{pki.server_key}"
sasl_enabled_mechanisms = ["OAUTHBEARER", "SCRAM-SHA-256"]
sasl_oauthbearer_jwks_file = "{jwks_file}"
sasl_oauthbearer_expected_issuer = "{ISSUER}"
sasl_oauthbearer_expected_audience = ["{AUDIENCE}"]
sasl_oauthbearer_clock_skew_seconds = 2
connections_max_reauth_ms = {reauth_ms}
"""
    )
    proc.config_file = config
    proc.start()
    return OAuthBroker(proc, pki, key, f"127.0.0.1:{plain}", f"127.0.0.1:{tls}")


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    b = start_oauth_broker(tmp_path_factory.mktemp("oauth"))
    try:
        yield b
    finally:
        b.proc.stop()


def confluent_conf(b: OAuthBroker, token: Any, tls: bool = False) -> dict[str, Any]:
    """``token()`` -> (jwt, exp) is called by librdkafka's oauth_cb."""
    conf: dict[str, Any] = {
        "bootstrap.servers": b.sasl_ssl if tls else b.sasl_plaintext,
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: token(),
    }
    if tls:
        conf["ssl.ca.location"] = str(b.pki.ca)
    return conf


def _fresh(b: OAuthBroker, subject: str = "alice", lifetime_s: float = 300) -> Any:
    def make() -> tuple[str, float]:
        token = b.key.token(subject, lifetime_s=lifetime_s)
        return token, time.time() + lifetime_s

    return make


def _round_trip(conf: dict[str, Any]) -> None:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
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
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(_COUNT)]


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_kafka_produces_and_consumes_with_a_jwt(
    oauth_broker: OAuthBroker, tls: bool
) -> None:
    _round_trip(confluent_conf(oauth_broker, _fresh(oauth_broker), tls))


def _auth_error(conf: dict[str, Any]) -> str:
    """The error a client reports when it cannot authenticate."""
    errors: list[ck.KafkaError] = []
    producer = ck.Producer({**conf, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "the client saw no error"
    assert errors[0].code() == ck.KafkaError._AUTHENTICATION, [str(e) for e in errors]
    return str(errors[0])


def test_an_expired_token_gets_authentication_failed(oauth_broker: OAuthBroker) -> None:
    expired = oauth_broker.key.token(lifetime_s=-60)
    # librdkafka refuses to send a token it knows expired, so claim it is still valid
    message = _auth_error(confluent_conf(oauth_broker, lambda: (expired, time.time() + 60)))
    assert "invalid_token" in message


def test_a_token_signed_by_another_key_gets_authentication_failed(
    oauth_broker: OAuthBroker,
) -> None:
    forged = SigningKey(oauth_broker.key.kid, "RS256", rsa_key().private)
    message = _auth_error(confluent_conf(oauth_broker, lambda: (forged.token(), time.time() + 60)))
    assert "invalid_token" in message


def test_the_wire_answer_to_a_bad_token_is_kafkas_json_then_close(
    oauth_broker: OAuthBroker,
) -> None:
    with RawClient(oauth_broker.sasl_plaintext) as raw:
        assert raw.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code.value == 0
        bad = initial_response(oauth_broker.key.token(aud="someone-else"))
        resp = raw.request(36, 1, {"auth_bytes": bad})
        assert resp.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert json.loads(resp.error_message) == {"status": "invalid_token"}
        assert raw.is_closed_by_peer()


def test_the_principal_of_a_token_is_the_sub_claim(oauth_broker: OAuthBroker) -> None:
    """A token whose authzid names someone else than its subject is refused
    (the principal is User:<sub>, not what the client claims)."""
    with RawClient(oauth_broker.sasl_plaintext) as raw:
        raw.request(17, 1, {"mechanism": "OAUTHBEARER"})
        claim = initial_response(oauth_broker.key.token("alice"), authzid="admin")
        assert raw.request(36, 1, {"auth_bytes": claim}).error_code.value == 58
    with RawClient(oauth_broker.sasl_plaintext) as raw:
        raw.request(17, 1, {"mechanism": "OAUTHBEARER"})
        ok = initial_response(oauth_broker.key.token("alice"), authzid="alice")
        assert raw.request(36, 1, {"auth_bytes": ok}).error_code.value == 0


# --- kafka-python and aiokafka -----------------------------------------------------------


def test_kafka_python_produces_and_consumes_with_a_jwt(oauth_broker: OAuthBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return oauth_broker.key.token("alice")

    conf: dict[str, Any] = {
        "bootstrap_servers": oauth_broker.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(oauth_broker.pki.ca),
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }
    topic = f"kp-oauth-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    for i in range(_COUNT):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, auto_offset_reset="earliest", consumer_timeout_ms=15_000, **conf
    )
    got: list[bytes] = []
    for m in consumer:  # ends after 15 s without records
        got.append(m.value)
        if len(got) == _COUNT:
            break
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(_COUNT)]


async def _aiokafka_round_trip(conf: dict[str, Any]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aio-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        for i in range(_COUNT):
            await producer.send_and_wait(topic, f"v{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(30):
            async for msg in consumer:
                got.append(msg.value)
                if len(got) == _COUNT:
                    break
    finally:
        await consumer.stop()
    return got


def _ca_context(cafile: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cafile))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def test_aiokafka_produces_and_consumes_with_a_jwt(oauth_broker: OAuthBroker) -> None:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return oauth_broker.key.token("alice")

    conf = {
        "bootstrap_servers": oauth_broker.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "ssl_context": _ca_context(oauth_broker.pki.ca),
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }
    assert asyncio.run(_aiokafka_round_trip(conf)) == [f"v{i}".encode() for i in range(_COUNT)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_aiokafka_over_sasl_ssl_with_scram(secure_broker: SecureBroker, mechanism: str) -> None:
    conf = {
        "bootstrap_servers": secure_broker.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "ssl_context": _ca_context(secure_broker.pki.ca),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }
    assert asyncio.run(_aiokafka_round_trip(conf)) == [f"v{i}".encode() for i in range(_COUNT)]


def test_aiokafka_over_mtls(secure_broker: SecureBroker) -> None:
    pki = secure_broker.pki
    conf = {
        "bootstrap_servers": secure_broker.mtls,
        "security_protocol": "SSL",
        "ssl_context": _ca_context(pki.ca, pki.client_cert, pki.client_key),
    }
    assert asyncio.run(_aiokafka_round_trip(conf)) == [f"v{i}".encode() for i in range(_COUNT)]
