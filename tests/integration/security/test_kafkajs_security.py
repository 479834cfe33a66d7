"""kafkajs (Node.js) over the secured listeners: SASL_SSL with SCRAM-SHA-256
and SCRAM-SHA-512, and mTLS with a client certificate, produce and consume;
a wrong password is refused with Kafka's SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.integration.security.conftest import PASSWORD, USER, SecureBroker
from tests.support.kafkajs import SCRIPTS


def _run(env: dict[str, str], **args: Any) -> dict[str, Any]:
    args.setdefault("count", 20)
    args["timeoutMs"] = 40_000
    proc = subprocess.run(
        ["node", str(SCRIPTS / "secure.js"), json.dumps(args)],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    out = proc.stdout.decode().strip().splitlines()
    assert proc.returncode == 0 and out, proc.stderr.decode(errors="replace")
    return json.loads(out[-1])  # type: ignore[no-any-return]


def _topic() -> str:
    return f"kjs-sec-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mechanism", ["scram-sha-256", "scram-sha-512"])
def test_kafkajs_over_sasl_ssl_with_scram(
    kafkajs: dict[str, str], secure_broker: SecureBroker, mechanism: str
) -> None:
    got = _run(
        kafkajs,
        broker=secure_broker.sasl_ssl,
        topic=_topic(),
        ca=str(secure_broker.pki.ca),
        sasl={"mechanism": mechanism, "username": USER, "password": PASSWORD},
    )
    assert got == {"produced": 20, "consumed": [f"v-{i}" for i in range(20)]}, got


def test_kafkajs_over_mtls(kafkajs: dict[str, str], secure_broker: SecureBroker) -> None:
    got = _run(
        kafkajs,
        broker=secure_broker.mtls,
        topic=_topic(),
        ca=str(secure_broker.pki.ca),
        cert=str(secure_broker.pki.client_cert),
        key=str(secure_broker.pki.client_key),
    )
    assert got == {"produced": 20, "consumed": [f"v-{i}" for i in range(20)]}, got


def test_kafkajs_with_a_wrong_password_is_refused(
    kafkajs: dict[str, str], secure_broker: SecureBroker
) -> None:
    got = _run(
        kafkajs,
        broker=secure_broker.sasl_ssl,
        topic=_topic(),
        ca=str(secure_broker.pki.ca),
        sasl={"mechanism": "scram-sha-256", "username": USER, "password": "wrong"},
    )
    assert "error" in got, got
    assert got["error"]["type"] == "SASL_AUTHENTICATION_FAILED" or (
        "SASL" in got["error"]["message"] and "auth" in got["error"]["message"].lower()
    ), got
