"""``--command-config``: a client.properties made for Kafka's tools (Java names)
or with librdkafka's names gives the settings confluent-kafka needs; what
librdkafka cannot use is refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.commands.client_config import ClientConfigError, read_client_config


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "client.properties"
    p.write_text(text)
    return p


def test_java_scram_properties_become_librdkafka_settings(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "# made for kafka-topics.sh\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism = SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="p=w \\"q\\"";\n'
        "ssl.truststore.type PEM\n"
        "ssl.truststore.location=/etc/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n",
    )
    assert read_client_config(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": 'p=w "q"',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_librdkafka_names_pass_through(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "security.protocol: SSL\n! a comment\n"
        "ssl.certificate.location=/c.pem\nssl.key.location=/k.pem\nssl.ca.location=/ca.pem\n",
    )
    assert read_client_config(path) == {
        "security.protocol": "SSL",
        "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/k.pem",
        "ssl.ca.location": "/ca.pem",
    }


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("ssl.truststore.location=/t.jks\nssl.truststore.password=x\n", "ssl.truststore.location"),
        ("ssl.keystore.location=/k.p12\nssl.keystore.type=PKCS12\n", "ssl.keystore.location"),
        (
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginModule required;\n",
            "sasl.jaas.config",
        ),
    ],
)
def test_what_librdkafka_cannot_use_is_refused_naming_the_key(
    tmp_path: Path, text: str, key: str
) -> None:
    with pytest.raises(ClientConfigError, match=key):
        read_client_config(_file(tmp_path, text))


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="cannot read"):
        read_client_config(tmp_path / "nope.properties")


def test_the_admin_requests_of_the_cli_log_in_as_the_file_says(tmp_path: Path) -> None:
    from api.commands.client_config import peer_security
    from ingest.security.listeners import SecurityProtocol

    plain = peer_security({})
    assert plain.protocol is SecurityProtocol.PLAINTEXT and plain.sasl_mechanism is None
    scram = peer_security(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": "pw",
        }
    )
    assert (scram.protocol, scram.sasl_mechanism, scram.username, scram.password) == (
        SecurityProtocol.SASL_PLAINTEXT,
        "SCRAM-SHA-512",
        "admin",
        "pw",
    )
    with pytest.raises(ClientConfigError, match="sasl.username"):
        peer_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"})
    with pytest.raises(ClientConfigError, match="sasl.mechanisms"):
        peer_security(
            {"security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI", "sasl.username": "a"}
        )
    with pytest.raises(ClientConfigError, match="security.protocol"):
        peer_security({"security.protocol": "SASL_TLS"})
