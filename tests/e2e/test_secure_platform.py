"""The whole platform with every kind of security on at once, walked as users would.

One ``tidelake serve``: the Kafka listener is SASL_SSL only (SCRAM-SHA-512),
the ACL authorizer is on (nothing is open without a binding; ``admin`` is the
super user), the schema registry takes basic auth with per-subject roles, the
Iceberg REST catalog takes OAuth2 client credentials with per-namespace
grants, the admin API and console need a login, and every HTTP listener
speaks HTTPS only. Users and ACLs are made with ``tidelake users`` and
``tidelake acls``, as an operator would.

The path: the producer ``pat`` writes Avro with Confluent's AvroSerializer to
the table topic ``orders``; the broker converts it into ``default.orders``
(reading the registry and writing the catalog from inside, with security on);
the catalog client ``analyst`` reads the table with pyiceberg; the consumer
``carl`` reads the topic in group ``orders-app`` with the AvroDeserializer
(which fetches the schema by id). Then every kind of refusal, each with the
error its protocol defines, while pat keeps producing and all of pat's
records reach the table and carl."""

from __future__ import annotations

import logging
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError

from tests.integration.security.certs import TestPki, make_pki
from tests.support.platform import TidelakeProcess
from tests.support.sasl_refusals import assert_every_answered_attempt_refused

ROOT = Path(__file__).resolve().parents[2]
USERS = {"admin": "admin-pw-1", "pat": "pat-pw-1", "carl": "carl-pw-1", "eve": "eve-pw-1"}
CATALOG_CLIENTS = {"analyst": "analyst-secret", "hr-bot": "hr-bot-secret"}
TOPIC, OTHER_TOPIC, GROUP = "orders", "payments", "orders-app"
ORDER = """{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
  {"name": "batch", "type": "string"}]}"""
PAYMENT = """{"type": "record", "name": "Payment", "namespace": "shop",
  "fields": [{"name": "amount", "type": "long"}]}"""


@dataclass(frozen=True)
class Secure:
    proc: TidelakeProcess
    pki: TestPki
    config: Path

    @property
    def registry(self) -> str:
        return f"https://localhost:{self.proc.registry_port}"

    @property
    def http(self) -> str:
        return f"https://localhost:{self.proc.http_port}"

    @property
    def ca(self) -> str:
        return str(self.pki.ca)

    @property
    def tls(self) -> ssl.SSLContext:
        """What httpx verifies the HTTPS listeners with: the test CA."""
        return ssl.create_default_context(cafile=self.ca)

    def kafka(self, user: str, password: str | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.proc.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": USERS[user] if password is None else password,
            "ssl.ca.location": self.ca,
            "log_level": 0,
        }

    def registry_client(self, user: str) -> SchemaRegistryClient:
        return SchemaRegistryClient(
            {
                "url": self.registry,
                "ssl.ca.location": self.ca,
                "basic.auth.user.info": f"{user}:{USERS[user]}",
            }
        )

    def catalog(self, client: str) -> RestCatalog:
        props: dict[str, Any] = {
            "uri": self.http,
            "credential": f"{client}:{CATALOG_CLIENTS[client]}",
            "oauth2-server-uri": f"{self.http}/v1/oauth/tokens",
            "ssl": {"cabundle": self.ca},
        }
        return RestCatalog(client, **props)


@pytest.fixture(autouse=True)
def own_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE win over pyiceberg's
    ``ssl.cabundle``: without them the test CA is used."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``tidelake ...`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    root = tmp_path_factory.mktemp("secure-platform")
    pki = make_pki(root / "pki")
    data = root / "data"
    proc = TidelakeProcess(data)
    tls = f'ssl_certfile = "{pki.server_cert}"\nssl_keyfile = "{pki.server_key}"'
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[broker]
listeners = ["SASL_SSL://127.0.0.1:{proc.kafka_port}"]
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
{tls}
authorizer = "acl"
allow_everyone_if_no_acl_found = false
super_users = ["User:admin"]

[registry]
auth = "basic"
roles = {{ admin = ["admin"], pat = ["write:orders-*"], carl = ["read:orders-value"], eve = ["write:payments-*"] }}
{tls}

[http]
auth = "basic"
{tls}

[catalog]
serve_oauth2_clients = {{ analyst = "{CATALOG_CLIENTS["analyst"]}", hr-bot = "{CATALOG_CLIENTS["hr-bot"]}" }}
serve_oauth2_permissions = {{ analyst = ["read:default"], hr-bot = ["write:hr"] }}
"""
    )
    data.mkdir(parents=True)
    for user, password in USERS.items():
        made = cli(
            "users",
            "create",
            user,
            "--mechanism",
            "SCRAM-SHA-512",
            "--password-stdin",
            "--config",
            str(config),
            "--data-dir",
            str(data),
            stdin=password + "\n",
        )
        assert made.returncode == 0, made.stderr
    proc.config_file = config
    proc.start()
    try:
        yield Secure(proc, pki, config)
    finally:
        proc.stop()


def acls(s: Secure, *args: str) -> None:
    done = cli("acls", *args, "--config", str(s.config), "--data-dir", str(s.proc.data_dir))
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def topics(secure: Secure) -> Secure:
    """The admin's set-up: the table topic, another topic, and the ACLs, with
    the CLI over SASL_SSL (a Java-style client.properties, as Kafka's tools take)."""
    props = secure.config.parent / "admin-client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{USERS["admin"]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secure.ca}\n"
    )
    kafka = ["--bootstrap-server", secure.proc.bootstrap, "--command-config", str(props)]
    table = [
        "--config=table.topic.enable=true",
        "--config=table.topic.commit.interval.ms=1000",
        "--config=table.topic.convert.value.type=by_schema_id",
        "--config=table.topic.transform.value.type=flatten",
    ]
    for topic, partitions, configs in ((TOPIC, "2", table), (OTHER_TOPIC, "1", [])):
        made = cli("topics", "create", topic, "--partitions", partitions, *configs, *kafka)
        assert made.returncode == 0, made.stderr
    listed = cli("topics", "list", *kafka)
    assert listed.returncode == 0 and {TOPIC, OTHER_TOPIC} <= set(listed.stdout.split()), listed
    # the same CLI without credentials is refused, not hung
    bare = cli("topics", "list", "--bootstrap-server", secure.proc.bootstrap, "--timeout", "5")
    assert bare.returncode != 0
    acls(secure, "add", "--allow", "User:pat", "--operation", "write", "--topic", TOPIC)
    acls(secure, "add", "--allow", "User:carl", "--operation", "read", "--topic", TOPIC)
    acls(secure, "add", "--allow", "User:carl", "--operation", "read", "--group", GROUP)
    listed = cli(
        "acls",
        "list",
        "--json",
        "--config",
        str(secure.config),
        "--data-dir",
        str(secure.proc.data_dir),
    )
    assert listed.returncode == 0 and "User:carl" in listed.stdout, listed.stderr
    return secure


def orders(batch: str, n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": start + i, "item": f"item-{i % 5}", "batch": batch} for i in range(n)]


def produce(s: Secure, values: list[dict[str, Any]]) -> list[ck.KafkaError]:
    """pat produces ``values`` as Avro; the delivery errors (none when all went in)."""
    serialize = AvroSerializer(s.registry_client("pat"), ORDER)
    errors: list[ck.KafkaError] = []
    producer = ck.Producer({**s.kafka("pat"), "acks": "all", "message.timeout.ms": 20000})
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    for value in values:
        producer.produce(
            TOPIC,
            serialize(value, ctx),
            key=str(value["id"]).encode(),
            on_delivery=lambda err, _m: errors.append(err) if err is not None else None,
        )
    assert producer.flush(30) == 0
    return errors


def table_rows(s: Secure, batch: str, expect: int, timeout: float = 90.0) -> list[dict[str, Any]]:
    """The analyst's rows of ``batch`` in ``default.orders``, once ``expect`` are there."""
    catalog = s.catalog("analyst")
    deadline = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if ("default", TOPIC) in catalog.list_tables("default"):
            table = catalog.load_table(("default", TOPIC))
            rows = [r for r in table.scan().to_arrow().to_pylist() if r["batch"] == batch]
            if len(rows) >= expect:
                return rows
        time.sleep(0.5)
    status = httpx.get(
        f"{s.http}/api/v1/table-topics", auth=("admin", USERS["admin"]), verify=s.tls
    )
    raise AssertionError(f"{len(rows)} of {expect} rows of {batch!r}; {status.text}")


def consume(s: Secure, user: str, group: str, until: int, timeout: float = 40.0) -> list[Any]:
    """Values (deserialized) or the first error a consumer in ``group`` gets."""
    deserialize = AvroDeserializer(s.registry_client(user))
    consumer = ck.Consumer({**s.kafka(user), "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    out: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < until and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == ck.KafkaError._PARTITION_EOF:
                    continue
                return [error]
            ctx = SerializationContext(TOPIC, MessageField.VALUE)
            out.append(deserialize(msg.value(), ctx))
    finally:  # closing commits what was read (auto commit)
        consumer.close()
    return out


def test_a_users_path_through_the_secured_platform(topics: Secure) -> None:
    s = topics
    sent = orders("first", 40)
    assert produce(s, sent) == []
    # the broker converted it with security on: the analyst reads the table
    rows = table_rows(s, "first", len(sent))
    assert sorted(r["id"] for r in rows) == list(range(40))
    assert {r["item"] for r in rows} == {f"item-{i}" for i in range(5)}
    # carl consumes in his group; the deserializer fetches the schema by id
    got = consume(s, "carl", GROUP, len(sent))
    assert sorted(v["id"] for v in got if isinstance(v, dict)) == list(range(40)), got[:1]
    # carl may read the id: a subject he may read holds it
    carl = s.registry_client("carl")
    schema_id = carl.get_latest_version(f"{TOPIC}-value").schema_id
    assert schema_id is not None
    assert '"Order"' in str(carl.get_schema(schema_id).schema_str)
    assert carl.get_subjects() == [f"{TOPIC}-value"]


def test_every_unauthorized_action_is_refused_while_authorized_work_flows(
    topics: Secure, caplog: pytest.LogCaptureFixture
) -> None:
    s = topics
    stop = threading.Event()
    delivered: list[int] = []
    failures: list[ck.KafkaError] = []

    def keep_producing() -> None:
        serialize = AvroSerializer(s.registry_client("pat"), ORDER)
        producer = ck.Producer({**s.kafka("pat"), "acks": "all", "linger.ms": 5})
        ctx = SerializationContext(TOPIC, MessageField.VALUE)
        i = 0

        def report(err: ck.KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(err)
            else:
                delivered.append(1)

        while not stop.is_set() and i < 2000:
            value = {"id": 1000 + i, "item": "during", "batch": "during"}
            producer.produce(TOPIC, serialize(value, ctx), on_delivery=report)
            producer.poll(0.02)
            i += 1
        producer.flush(30)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    try:
        _kafka_refusals(s, caplog)
        _registry_refusals(s)
        _catalog_refusals(s)
        _http_refusals(s)
    finally:
        stop.set()
        writer.join(60)
    assert not writer.is_alive()
    assert failures == [] and len(delivered) > 10, (failures[:3], len(delivered))
    # ... and after: everything pat sent during the refusals is in the table and reaches carl
    after = orders("after", 10, start=5000)
    assert produce(s, after) == []
    assert len(table_rows(s, "during", len(delivered))) == len(delivered)
    assert len(table_rows(s, "after", len(after))) == len(after)
    got = consume(s, "carl", GROUP, len(delivered) + len(after))
    assert {v["batch"] for v in got if isinstance(v, dict)} == {"during", "after"}, got[:1]
    assert len(got) == len(delivered) + len(after)


def _kafka_refusals(s: Secure, caplog: pytest.LogCaptureFixture) -> None:
    # pat has no WRITE on payments (nor a registry role on its subject: plain bytes)
    outcome: list[ck.KafkaError | None] = []
    producer = ck.Producer({**s.kafka("pat"), "message.timeout.ms": 15000})
    producer.produce(OTHER_TOPIC, b"x", on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(20)
    assert len(outcome) == 1 and outcome[0] is not None, outcome
    assert outcome[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata leaves out what a user may not describe; the super user sees all
    seen_by_pat = AdminClient(s.kafka("pat")).list_topics(timeout=15).topics
    assert TOPIC in seen_by_pat and OTHER_TOPIC not in seen_by_pat
    assert OTHER_TOPIC in AdminClient(s.kafka("admin")).list_topics(timeout=15).topics
    # carl may read the topic, but not in another group
    got = consume(s, "carl", "not-carls-group", 1, timeout=20)
    assert len(got) == 1 and isinstance(got[0], ck.KafkaError), got[:1]
    assert got[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    # eve has no ACL at all: she may not read orders (as a member of carl's group either)
    got = consume(s, "eve", GROUP, 1, timeout=20)
    assert len(got) == 1 and isinstance(got[0], ck.KafkaError), got[:1]
    assert got[0].code() in (
        ck.KafkaError.GROUP_AUTHORIZATION_FAILED,
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED,
    )
    # a wrong password: SASL_AUTHENTICATION_FAILED (58), as kafka-python names it
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaError):
        KafkaAdminClient(
            bootstrap_servers=s.proc.bootstrap,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="pat",
            sasl_plain_password="not-pats-password",
            ssl_cafile=s.ca,
            bootstrap_timeout_ms=3000,
        )
    seen = [r.getMessage() for r in caplog.records if "Bootstrap connection" in r.getMessage()]
    assert_every_answered_attempt_refused(seen)
    # and confluent-kafka's view of the same refusal
    reported: list[ck.KafkaError] = []
    wrong = ck.Producer({**s.kafka("pat", "not-pats-password"), "error_cb": reported.append})
    deadline = time.monotonic() + 20
    while not reported and time.monotonic() < deadline:
        wrong.poll(0.2)
    assert reported and reported[0].code() == ck.KafkaError._AUTHENTICATION, reported


def _registry_refusals(s: Secure) -> None:
    # carl reads orders-value, he may not register under it
    with pytest.raises(SchemaRegistryError) as err:
        s.registry_client("carl").register_schema(f"{TOPIC}-value", Schema(ORDER, "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    # eve writes payments-*: she registers there, but may not read orders' schema by its id
    eve = s.registry_client("eve")
    eve.register_schema(f"{OTHER_TOPIC}-value", Schema(PAYMENT, "AVRO"))
    orders_id = s.registry_client("carl").get_latest_version(f"{TOPIC}-value").schema_id
    assert orders_id is not None
    with pytest.raises(SchemaRegistryError) as err:
        eve.get_schema(orders_id)
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    assert eve.get_subjects() == [f"{OTHER_TOPIC}-value"]
    # nobody at all: 401
    anonymous = httpx.get(f"{s.registry}/subjects", verify=s.tls)
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == 401


def _catalog_refusals(s: Secure) -> None:
    hr_bot = s.catalog("hr-bot")
    hr_bot.create_namespace_if_not_exists("hr")  # its own namespace works
    with pytest.raises(ForbiddenError):
        hr_bot.load_table(("default", TOPIC))
    # the wire answer, per the Iceberg REST spec's ErrorModel
    form = {
        "grant_type": "client_credentials",
        "client_id": "hr-bot",
        "client_secret": CATALOG_CLIENTS["hr-bot"],
        "scope": "catalog",
    }
    token = httpx.post(f"{s.http}/v1/oauth/tokens", data=form, verify=s.tls).json()["access_token"]
    refused = httpx.get(
        f"{s.http}/v1/namespaces/default/tables/{TOPIC}",
        headers={"Authorization": f"Bearer {token}"},
        verify=s.tls,
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "ForbiddenException"
    assert refused.json()["error"]["code"] == 403
    # the analyst only reads: it may not write into default
    with pytest.raises(ForbiddenError):
        s.catalog("analyst").create_namespace("default_scratch")


def _http_refusals(s: Secure) -> None:
    for path in ("/api/v1/topics", "/api/v1/table-topics", "/ui"):
        anonymous = httpx.get(f"{s.http}{path}", verify=s.tls)
        assert anonymous.status_code == 401, path
        assert anonymous.headers["www-authenticate"].startswith("Basic")
    assert httpx.get(f"{s.http}/v1/namespaces", verify=s.tls).status_code == 401
    logged_in = httpx.get(f"{s.http}/api/v1/topics", auth=("carl", USERS["carl"]), verify=s.tls)
    assert logged_in.status_code == 200
    with pytest.raises(httpx.HTTPError):  # HTTPS only
        httpx.get(
            f"http://127.0.0.1:{s.proc.http_port}/api/v1/topics", timeout=5
        ).raise_for_status()
