"""Inter-broker connections over TLS and SASL, against an in-process broker's
own listener code (its TLS context, SASL authenticator and ACL authorizer),
plus the SCRAM client's messages against RFC 7677's example."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import i16, i32
from pydantic import SecretStr

from ingest.broker import Broker
from ingest.cluster.peer_client import peer_request
from ingest.cluster.peer_connection import (
    PeerAuthenticationError,
    PeerSecurity,
    ScramClient,
    open_peer_connection,
)
from ingest.cluster.view import BrokerEndpoint
from ingest.config import BrokerConfig
from ingest.errors import ConfigError
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.s3stream import MemoryStreamEngine
from ingest.security.listeners import SecurityProtocol
from ingest.security.scram import make_credential
from tests.integration.security.certs import TestPki, make_pki

BROKER_PASSWORD = "broker-secret-1"


def test_scram_client_sends_rfc7677_messages_and_checks_the_server_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(PeerAuthenticationError, match="signature"):
        client.verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_client_refuses_a_server_that_does_not_extend_its_nonce() -> None:
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    with pytest.raises(PeerAuthenticationError, match="nonce"):
        client.final(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(PeerAuthenticationError, match="refused"):
        client.final(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=10")  # too few iterations


def test_scram_client_escapes_the_user_name() -> None:
    assert ScramClient("SCRAM-SHA-256", "a,b=c", "x", nonce="n").first() == b"n,,n=a=2Cb=3Dc,r=n"


def _config(**kw: object) -> BrokerConfig:
    return BrokerConfig.model_validate(kw)


def test_settings_missing_for_a_sasl_ssl_inter_broker_listener_are_all_named() -> None:
    with pytest.raises(ConfigError) as e:
        PeerSecurity.from_settings(_config(), SecurityProtocol.SASL_SSL)
    message = str(e.value)
    for key in (
        "inter_broker_sasl_mechanism",
        "inter_broker_sasl_username",
        "inter_broker_sasl_password",
        "inter_broker_ssl_cafile",
        "inter_broker_listener_name",
        "PLAINTEXT",
    ):
        assert key in message
    with pytest.raises(ConfigError, match="inter_broker_ssl_certfile"):
        PeerSecurity.from_settings(_config(ssl_cafile=__file__), SecurityProtocol.SSL, "required")


def test_plaintext_needs_no_inter_broker_settings_and_a_missing_file_is_named() -> None:
    assert PeerSecurity.from_settings(_config(), SecurityProtocol.PLAINTEXT) == PeerSecurity()
    with pytest.raises(ConfigError, match="inter_broker_ssl_cafile.*no such file"):
        PeerSecurity.from_settings(
            _config(inter_broker_ssl_cafile="/nonexistent/ca.pem"), SecurityProtocol.SSL
        )


def test_the_password_is_never_shown() -> None:
    config = _config(
        inter_broker_sasl_mechanism="SCRAM-SHA-512",
        inter_broker_sasl_username="broker",
        inter_broker_sasl_password=BROKER_PASSWORD,
    )
    assert isinstance(config.inter_broker_sasl_password, SecretStr)
    security = PeerSecurity.from_settings(config, SecurityProtocol.SASL_PLAINTEXT)
    assert BROKER_PASSWORD not in repr(config) and BROKER_PASSWORD not in repr(security)
    assert security.password == BROKER_PASSWORD


@dataclass
class Secured:
    broker: Broker
    pki: TestPki
    ports: dict[str, int]

    def endpoint(self, listener: str) -> BrokerEndpoint:
        return BrokerEndpoint(1, "127.0.0.1", self.ports[listener])

    def security(self, protocol: SecurityProtocol, **kw: object) -> PeerSecurity:
        base: dict[str, object] = {"cafile": str(self.pki.ca)} if protocol.uses_tls else {}
        if protocol.uses_sasl:
            base.update(sasl_mechanism="SCRAM-SHA-512", username="broker", password=BROKER_PASSWORD)
        base.update(kw)
        return PeerSecurity(protocol, **base)  # type: ignore[arg-type]


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    """A broker with SASL_SSL, SASL_PLAINTEXT and mTLS (SSL, client certificates
    required) listeners, the ACL authorizer on and User:broker a super user."""
    pki = make_pki(tmp_path / "pki", client_cn="broker")
    config = _config(
        node_id=1,
        listeners=[
            "SASL_SSL://127.0.0.1:0",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "MTLS://127.0.0.1:0",
        ],
        listener_security_protocol_map={"MTLS": "SSL"},
        listener_ssl_client_auth={"MTLS": "required"},
        ssl_certfile=str(pki.server_cert),
        ssl_keyfile=str(pki.server_key),
        ssl_cafile=str(pki.ca),
        authorizer="acl",
        super_users=["User:broker"],
        connection_failed_authentication_delay_ms=0,
    )
    broker = Broker(config, MemoryMetadataStore(), MemoryStreamEngine())
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        broker.credentials.put("broker", make_credential(BROKER_PASSWORD, mechanism))
        broker.credentials.put("app", make_credential("app-secret", mechanism))
    await broker.start()
    try:
        yield Secured(broker, pki, dict(broker.bound_ports))
    finally:
        await broker.stop()


async def _api_versions(secured: Secured, listener: str, security: PeerSecurity) -> None:
    response = await peer_request(
        secured.endpoint(listener),
        18,
        3,
        ApiVersionsRequest(client_software_name="tidelake", client_software_version="1"),
        5.0,
        security=security,
    )
    assert isinstance(response, ApiVersionsResponse) and response.error_code == 0


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
async def test_a_peer_request_authenticates_with_each_mechanism(
    secured: Secured, mechanism: str, listener: str
) -> None:
    protocol = SecurityProtocol(listener)
    await _api_versions(secured, listener, secured.security(protocol, sasl_mechanism=mechanism))


async def test_a_wrong_password_is_refused_with_the_peers_error(secured: Secured) -> None:
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        wrong = secured.security(
            SecurityProtocol.SASL_SSL, sasl_mechanism=mechanism, password="wrong"
        )
        with pytest.raises(PeerAuthenticationError, match="SASL_AUTHENTICATION_FAILED.*invalid"):
            await _api_versions(secured, "SASL_SSL", wrong)
    assert secured.broker.authenticator.mechanisms  # the broker still serves
    await _api_versions(secured, "SASL_SSL", secured.security(SecurityProtocol.SASL_SSL))


async def test_a_mechanism_the_peer_does_not_offer_is_named(secured: Secured) -> None:
    secured.broker.authenticator.mechanisms = ("SCRAM-SHA-256",)
    with pytest.raises(PeerAuthenticationError, match=r"SCRAM-SHA-512.*\['SCRAM-SHA-256'\]"):
        await _api_versions(secured, "SASL_SSL", secured.security(SecurityProtocol.SASL_SSL))


async def test_tls_checks_the_peer_certificate_and_its_host_name(secured: Secured) -> None:
    untrusted = secured.security(SecurityProtocol.SASL_SSL, cafile=str(secured.pki.other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        await _api_versions(secured, "SASL_SSL", untrusted)
    # the certificate names localhost and 127.0.0.1: both are accepted by name
    security = secured.security(SecurityProtocol.SASL_SSL)
    for host in ("localhost", "127.0.0.1"):
        _reader, writer = await open_peer_connection(host, secured.ports["SASL_SSL"], security, 5.0)
        writer.close()
        await writer.wait_closed()
    ctx = security.ssl_context
    assert ctx is not None and ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    lax = secured.security(SecurityProtocol.SASL_SSL, check_hostname=False).ssl_context
    assert lax is not None and not lax.check_hostname


async def test_mtls_passes_the_brokers_client_certificate(secured: Secured) -> None:
    without = secured.security(SecurityProtocol.SSL)
    with pytest.raises((ssl.SSLError, ConnectionError, EOFError)):
        await _api_versions(secured, "MTLS", without)
    with_cert = secured.security(
        SecurityProtocol.SSL,
        certfile=str(secured.pki.client_cert),
        keyfile=str(secured.pki.client_key),
    )
    await _api_versions(secured, "MTLS", with_cert)


def _markers() -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(
        markers=(
            WritableTxnMarker(
                producer_id=ProducerId(7),
                producer_epoch=i16(0),
                transaction_result=True,
                topics=(
                    WritableTxnMarkerTopic(name=TopicName("nowhere"), partition_indexes=(i32(0),)),
                ),
                coordinator_epoch=i32(0),
            ),
        )
    )


async def _marker_code(secured: Secured, listener: str, security: PeerSecurity) -> ErrorCode:
    response = await peer_request(
        secured.endpoint(listener), 27, 1, _markers(), 5.0, security=security
    )
    assert isinstance(response, WriteTxnMarkersResponse)
    return ErrorCode(response.markers[0].topics[0].partitions[0].error_code)


async def test_markers_from_the_brokers_user_pass_the_cluster_action_check(
    secured: Secured,
) -> None:
    """WriteTxnMarkers needs CLUSTER_ACTION: the brokers' user (a super user,
    over SASL or by its certificate) gets past it; another user does not."""
    broker = secured.security(SecurityProtocol.SASL_SSL)
    assert await _marker_code(secured, "SASL_SSL", broker) != ErrorCode.cluster_authorization_failed
    by_cert = secured.security(
        SecurityProtocol.SSL,
        certfile=str(secured.pki.client_cert),
        keyfile=str(secured.pki.client_key),
    )
    assert await _marker_code(secured, "MTLS", by_cert) != ErrorCode.cluster_authorization_failed
    app = secured.security(SecurityProtocol.SASL_SSL, username="app", password="app-secret")
    assert await _marker_code(secured, "SASL_SSL", app) == ErrorCode.cluster_authorization_failed
