"""The real CLI (``python -m api.cli``) against one real ``tidelake serve`` whose
schema registry and HTTP listener ask for basic auth over HTTPS with a private
CA and whose Kafka listeners include SASL_SSL: ``schemas list``, ``tables
status`` and ``cluster status`` fail with one line that says how to log in,
then work with ``--http-user`` / ``TIDELAKE_HTTP_*`` / ``--ca-file`` or a
``--command-config`` file; ``tables status`` counts dead letters through the
SASL_SSL listener with that file's Kafka settings."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.integration.security.certs import TestPki, make_pki
from tests.integration.security.conftest import users_cli
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

ROOT = Path(__file__).resolve().parents[3]
USER, PASSWORD = "ops", "ops-secret-1"
DEAD_LETTERS = 3


@dataclass(frozen=True)
class Platform:
    proc: TidelakeProcess
    pki: TestPki
    sasl_ssl: str
    root: Path

    @property
    def registry(self) -> str:
        return f"https://127.0.0.1:{self.proc.registry_port}"

    @property
    def http(self) -> str:
        return f"https://127.0.0.1:{self.proc.http_port}"

    def kafka(self) -> dict[str, str | int | float | bool]:
        return {
            "bootstrap.servers": self.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(self.pki.ca),
        }


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    root = tmp_path_factory.mktemp("clilogin")
    pki = make_pki(root / "pki")
    data = root / "data"
    data.mkdir()
    made = users_cli(data, "create", USER, "--password", PASSWORD)
    assert made.returncode == 0, made.stderr
    proc = TidelakeProcess(data)
    sasl_ssl = free_port()
    tls = f'ssl_certfile = "{pki.server_cert}"\nssl_keyfile = "{pki.server_key}"'
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[broker]
listeners = ["PLAINTEXT://127.0.0.1:{proc.kafka_port}", "SASL_SSL://127.0.0.1:{sasl_ssl}"]
{tls}

[registry]
auth = "basic"
{tls}

[http]
auth = "basic"
{tls}
"""
    )
    proc.config_file = config
    proc.start()
    try:
        p = Platform(proc, pki, f"127.0.0.1:{sasl_ssl}", root)
        admin = AdminClient(p.kafka())
        topics = [
            NewTopic("orders", 1, 1, config={"table.topic.enable": "true"}),
            NewTopic("orders.dlq", 1, 1),
        ]
        for future in admin.create_topics(topics).values():
            future.result(30)
        producer = Producer(p.kafka())
        for i in range(DEAD_LETTERS):
            producer.produce("orders.dlq", value=f"bad-{i}".encode())
        assert producer.flush(30) == 0
        yield p
    finally:
        proc.stop()


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDELAKE_")}
    clean.pop("SSL_CERT_FILE", None)
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def _refused_in_one_line(r: subprocess.CompletedProcess[str], service: str) -> None:
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "(401)" in ln)
    assert f"{service} at " in line and "asks for a login (401): pass --http-user" in line
    assert "TIDELAKE_HTTP_USER" in line


def _login_env(p: Platform) -> dict[str, str]:
    return {
        "TIDELAKE_HTTP_USER": USER,
        "TIDELAKE_HTTP_PASSWORD": PASSWORD,
        "TIDELAKE_HTTP_CA_FILE": str(p.pki.ca),
    }


def test_schemas_list_needs_a_login_and_the_ca(platform: Platform) -> None:
    untrusted = cli("schemas", "list", "--url", platform.registry)
    assert untrusted.returncode == 1 and "--ca-file" in untrusted.stderr
    assert "Traceback" not in untrusted.stderr
    ca = str(platform.pki.ca)
    _refused_in_one_line(
        cli("schemas", "list", "--url", platform.registry, "--ca-file", ca),
        "the schema registry",
    )
    logged_in = cli(
        "schemas",
        "list",
        "--url",
        platform.registry,
        "--ca-file",
        ca,
        TIDELAKE_HTTP_USER=USER,
        TIDELAKE_HTTP_PASSWORD=PASSWORD,
    )
    assert logged_in.returncode == 0, logged_in.stderr
    assert logged_in.stdout == ""  # no subjects yet, and no error


def test_schemas_take_confluents_client_properties(platform: Platform) -> None:
    conf = platform.root / "registry.properties"
    conf.write_text(
        "basic.auth.credentials.source=USER_INFO\n"
        f"basic.auth.user.info={USER}:{PASSWORD}\n"
        f"schema.registry.ssl.ca.location={platform.pki.ca}\n"
    )
    avsc = platform.root / "order.avsc"
    avsc.write_text('{"type": "record", "name": "O", "fields": [{"name": "id", "type": "long"}]}')
    base = ["schemas", "--url", platform.registry, "--command-config", str(conf)]
    registered = cli(*base, "register", "orders-value", str(avsc))
    assert registered.returncode == 0, registered.stderr
    listed = cli(*base, "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["orders-value"]


def _orders_row(p: Platform) -> None:
    """Wait until the table topic shows in the status (its worker started)."""
    deadline = time.monotonic() + 30
    trust = ssl.create_default_context(cafile=str(p.pki.ca))
    while time.monotonic() < deadline:
        rows = httpx.get(
            f"{p.http}/api/v1/table-topics", auth=(USER, PASSWORD), verify=trust, timeout=10
        ).json()
        if any(r.get("topic") == "orders" for r in rows):
            return
        time.sleep(0.3)
    raise AssertionError(f"no status row for orders\n{p.proc.log_tail()}")


def test_tables_status_logs_in_and_counts_dead_letters_over_sasl_ssl(platform: Platform) -> None:
    _orders_row(platform)
    base = ["tables", "status", "--http-url", platform.http, "--json"]
    _refused_in_one_line(cli(*base, TIDELAKE_HTTP_CA_FILE=str(platform.pki.ca)), "the HTTP API")
    # a PLAINTEXT client cannot ask the SASL_SSL listener: the service's count (0) stays
    plain = cli(*base, "-b", platform.sasl_ssl, **_login_env(platform))
    assert plain.returncode == 0, plain.stderr
    assert {r["topic"]: r["dead_letters"] for r in json.loads(plain.stdout)}["orders"] == 0

    conf = platform.root / "client.properties"
    conf.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{PASSWORD}";\n'
        f"ssl.ca.location={platform.pki.ca}\n"
        f"basic.auth.user.info={USER}:{PASSWORD}\n"
    )
    secured = cli(
        *base,
        "-b",
        platform.sasl_ssl,
        "--command-config",
        str(conf),
        "--ca-file",
        str(platform.pki.ca),
    )
    assert secured.returncode == 0, secured.stderr
    rows = {r["topic"]: r for r in json.loads(secured.stdout)}
    assert rows["orders"]["dead_letters"] == DEAD_LETTERS


def test_cluster_status_needs_a_login(platform: Platform) -> None:
    ca = str(platform.pki.ca)
    base = ["cluster", "status", "--http", platform.http, "--sample-ms", "0", "--ca-file", ca]
    _refused_in_one_line(cli(*base), "the HTTP API")
    logged_in = cli(*base, "--http-user", USER, TIDELAKE_HTTP_PASSWORD=PASSWORD)
    assert logged_in.returncode == 0, logged_in.stderr
    assert "controller: node" in logged_in.stdout
