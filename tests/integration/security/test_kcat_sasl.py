"""kcat (Debian's, librdkafka 2.0.x) over SASL_PLAINTEXT and SASL_SSL with
SCRAM, and over mTLS: produce then consume the same records. librdkafka
checks SaslHandshake v0 in ApiVersions before it will authenticate with
SCRAM; a broker advertising v1 only made kcat fail with "SASL Handshake not
supported by broker"."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.integration.broker.rawkafka import RawClient
from tests.integration.security.conftest import PASSWORD, USER, SecureBroker


def _kcat(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60)


def _round_trip(security: list[str]) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = [f"record-{i}" for i in range(20)]
    produced = _kcat([*security, "-P", "-t", topic], stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    assert "not supported" not in produced.stderr
    consumed = _kcat([*security, "-C", "-t", topic, "-o", "beginning", "-e", "-q"])
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_over_sasl_plaintext_with_scram(secure_broker: SecureBroker, mechanism: str) -> None:
    _round_trip(
        [
            "-b", secure_broker.sasl_plaintext,
            "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", f"sasl.mechanisms={mechanism}",
            "-X", f"sasl.username={USER}",
            "-X", f"sasl.password={PASSWORD}",
        ]
    )  # fmt: skip


def test_kcat_over_sasl_ssl_with_scram(secure_broker: SecureBroker) -> None:
    _round_trip(
        [
            "-b", secure_broker.sasl_ssl,
            "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanisms=SCRAM-SHA-512",
            "-X", f"sasl.username={USER}",
            "-X", f"sasl.password={PASSWORD}",
            "-X", f"ssl.ca.location={secure_broker.pki.ca}",
        ]
    )  # fmt: skip


def test_kcat_over_mtls(secure_broker: SecureBroker) -> None:
    pki = secure_broker.pki
    _round_trip(
        [
            "-b", secure_broker.mtls,
            "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={pki.ca}",
            "-X", f"ssl.certificate.location={pki.client_cert}",
            "-X", f"ssl.key.location={pki.client_key}",
        ]
    )  # fmt: skip


def test_kcat_with_a_wrong_password_is_refused(secure_broker: SecureBroker) -> None:
    listed = _kcat(
        [
            "-b", secure_broker.sasl_plaintext,
            "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanisms=SCRAM-SHA-256",
            "-X", f"sasl.username={USER}",
            "-X", "sasl.password=wrong",
            "-L", "-m", "5",
        ]
    )  # fmt: skip
    assert listed.returncode != 0
    assert "Authentication failed" in listed.stderr, listed.stderr


def test_saslhandshake_is_advertised_from_v0_and_a_v0_handshake_is_refused(
    secure_broker: SecureBroker,
) -> None:
    """What librdkafka's feature check reads, and what a pre-1.0 client gets."""
    with RawClient(secure_broker.sasl_plaintext) as raw:
        versions = raw.request(
            18, 3, {"client_software_name": "raw", "client_software_version": "1"}
        )
        handshake = next(k for k in versions.api_keys if k.api_key == 17)
        assert (handshake.min_version, handshake.max_version) == (0, 1)
        assert (
            raw.request(17, 0, {"mechanism": "PLAIN"}).error_code.value == 35
        )  # UNSUPPORTED_VERSION
        assert raw.is_closed_by_peer()
