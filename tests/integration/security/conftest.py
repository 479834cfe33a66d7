"""One real ``tidelake serve`` with a PLAINTEXT, a SASL_SSL, a SASL_PLAINTEXT
and an mTLS (SSL, client certificate required) listener; users made with
``tidelake users create``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.security.certs import TestPki, make_pki
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

USER, PASSWORD = "alice", "alice-secret-1"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret-1"  # a super user
ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class SecureBroker:
    proc: TidelakeProcess
    pki: TestPki
    plaintext: str
    sasl_ssl: str
    sasl_plaintext: str
    mtls: str
    data_dir: Path


def users_cli(
    data_dir: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "users", *args, "--data-dir", str(data_dir)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    root = tmp_path_factory.mktemp("secure")
    pki = make_pki(root / "pki")
    data = root / "data"
    data.mkdir()
    made = users_cli(data, "create", USER, "--password-stdin", stdin=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    made = users_cli(data, "create", ADMIN, "--password", ADMIN_PASSWORD)
    assert made.returncode == 0, made.stderr
    proc = TidelakeProcess(data)
    sasl_ssl, sasl_plain, mtls = free_port(), free_port(), free_port()
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[broker]
listeners = [
    "PLAINTEXT://127.0.0.1:{proc.kafka_port}",
    "SASL_SSL://127.0.0.1:{sasl_ssl}",
    "SASL_PLAINTEXT://127.0.0.1:{sasl_plain}",
    "MTLS://127.0.0.1:{mtls}",
]
listener_security_protocol_map = {{ MTLS = "SSL" }}
listener_ssl_client_auth = {{ MTLS = "required" }}
ssl_certfile = "{pki.server_cert}"
ssl_keyfile = "{pki.server_key}"
ssl_cafile = "{pki.ca}"
super_users = ["User:{ADMIN}"]
"""
    )
    proc.config_file = config
    proc.start()
    try:
        yield SecureBroker(
            proc,
            pki,
            proc.bootstrap,
            f"127.0.0.1:{sasl_ssl}",
            f"127.0.0.1:{sasl_plain}",
            f"127.0.0.1:{mtls}",
            data,
        )
    finally:
        proc.stop()
