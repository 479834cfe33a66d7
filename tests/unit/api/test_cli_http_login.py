"""The CLI's login to Tidelake's HTTP services (``api/commands/http_client.py``):
where the user, password and CA come from, Confluent's ``basic.auth.user.info``,
and a 401 as one line that says how to log in, from the real commands against a
tiny local HTTP server that asks for basic auth."""

from __future__ import annotations

import argparse
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from api.cli import main
from api.commands.http_client import HttpLogin, http_login, kafka_settings, login_from_args

USER, PASSWORD = "alice", "alice:pw-1"  # a colon in a password stays in it
ENV = ("TIDELAKE_HTTP_USER", "TIDELAKE_HTTP_PASSWORD", "TIDELAKE_HTTP_CA_FILE")

CLUSTER = {
    "cluster_id": "c1",
    "controller": 1,
    "node_id": 1,
    "brokers": [
        {
            "node_id": 1,
            "host": "127.0.0.1",
            "port": 9092,
            "rack": None,
            "draining": False,
            "live": True,
            "partitions": 3,
        }
    ],
    "moves_in_flight": [],
    "partitions": [],
}
BODIES: dict[str, object] = {
    "/subjects": ["orders-value"],
    "/api/v1/table-topics": [{"topic": "orders", "table": "default.orders", "state": "running"}],
    "/api/v1/storage": {"state": "ok"},
    "/api/v1/cluster": CLUSTER,
}


@pytest.fixture(autouse=True)
def _no_login_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[str]:
    """Answers BODIES to alice:PASSWORD only; 401 with a basic challenge otherwise."""
    good = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.headers.get("Authorization") != good:
                data = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="tidelake"')
            else:
                data = json.dumps(BODIES[self.path.split("?")[0]]).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join()
        httpd.server_close()


def _args(**values: str | None) -> argparse.Namespace:
    base: dict[str, str | None] = {
        "http_user": None,
        "http_password": None,
        "http_password_file": None,
        "ca_file": None,
        "command_config": None,
    }
    return argparse.Namespace(**{**base, **values})


def _props(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


# -- where the login comes from -------------------------------------------------------


def test_flags_beat_the_environment_and_the_environment_beats_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    conf = _props(tmp_path, "basic.auth.user.info=carl:from-conf\n")
    monkeypatch.setenv("TIDELAKE_HTTP_USER", "bob")
    monkeypatch.setenv("TIDELAKE_HTTP_PASSWORD", "from-env")

    assert login_from_args(_args(command_config=conf)) == HttpLogin("bob", "from-env")
    assert login_from_args(_args(http_user="dave", command_config=conf)).user == "dave"
    by_file = login_from_args(_args(http_password_file=str(secret)))
    assert by_file.password == "from-file"  # the trailing newline is not part of it
    both = _args(http_password="from-flag", http_password_file=str(secret))
    assert login_from_args(both).password == "from-flag"

    monkeypatch.delenv("TIDELAKE_HTTP_USER")
    monkeypatch.delenv("TIDELAKE_HTTP_PASSWORD")
    assert login_from_args(_args(command_config=conf)) == HttpLogin("carl", "from-conf")
    # the file's password is only used for the file's user
    with pytest.raises(SystemExit, match="no password for --http-user erin"):
        login_from_args(_args(http_user="erin", command_config=conf))


def test_no_user_anywhere_means_no_login() -> None:
    assert login_from_args(_args()) == HttpLogin()
    assert login_from_args(_args()).request_options() == {}


def test_a_missing_password_is_prompted_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import getpass
    import sys

    asked: list[str] = []

    def prompt(text: str = "") -> str:
        asked.append(text)
        return "typed-pw"

    monkeypatch.setattr(getpass, "getpass", prompt)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    with pytest.raises(SystemExit, match="TIDELAKE_HTTP_PASSWORD"):
        http_login(_args(http_user="bob"))
    assert asked == []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    assert http_login(_args(http_user="bob")) == HttpLogin("bob", "typed-pw")
    assert asked == ["password of bob: "]


def test_an_unreadable_password_file_is_named() -> None:
    with pytest.raises(SystemExit, match="--http-password-file /nonexistent/pw"):
        http_login(_args(http_user="bob", http_password_file="/nonexistent/pw"))


# -- Confluent's names in --command-config ----------------------------------------------


def test_basic_auth_user_info_and_the_registry_ca_are_read(tmp_path: Path) -> None:
    conf = _props(
        tmp_path,
        "basic.auth.credentials.source=USER_INFO\n"
        f"basic.auth.user.info={USER}:{PASSWORD}\n"
        "schema.registry.ssl.ca.location=/etc/ca.pem\n",
    )
    assert login_from_args(_args(command_config=conf)) == HttpLogin(USER, PASSWORD, "/etc/ca.pem")
    # the Java client's prefixed names work too
    conf = _props(tmp_path, "schema.registry.basic.auth.user.info=bob:pw\n")
    assert login_from_args(_args(command_config=conf)) == HttpLogin("bob", "pw")


def test_ca_file_flag_and_environment_beat_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _props(tmp_path, "schema.registry.ssl.ca.location=/from/conf.pem\n")
    monkeypatch.setenv("TIDELAKE_HTTP_CA_FILE", "/from/env.pem")
    assert login_from_args(_args(command_config=conf)).ca_file == "/from/env.pem"
    assert login_from_args(_args(ca_file="/flag.pem", command_config=conf)).ca_file == "/flag.pem"


def test_sasl_inherit_logs_in_as_the_kafka_user(tmp_path: Path) -> None:
    conf = _props(
        tmp_path,
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="svc" password="svc-pw";\n'
        "basic.auth.credentials.source=SASL_INHERIT\n",
    )
    assert login_from_args(_args(command_config=conf)) == HttpLogin("svc", "svc-pw")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("basic.auth.user.info=no-colon\n", "basic.auth.user.info expects USER:PASSWORD"),
        ("basic.auth.credentials.source=TOKEN\n", "TOKEN is not supported"),
    ],
)
def test_a_bad_basic_auth_setting_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        login_from_args(_args(command_config=_props(tmp_path, text)))


def test_kafka_client_settings_leave_out_the_http_only_keys() -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "ca.pem",
        "basic.auth.user.info": "a:b",
        "basic.auth.credentials.source": "USER_INFO",
        "schema.registry.ssl.ca.location": "ca.pem",
        "bearer.auth.token": "t",
    }
    assert kafka_settings(props) == {"security.protocol": "SASL_SSL", "ssl.ca.location": "ca.pem"}


def test_an_unloadable_ca_file_is_named() -> None:
    with pytest.raises(SystemExit, match="--ca-file /nonexistent/ca.pem"):
        HttpLogin(ca_file="/nonexistent/ca.pem").request_options()


# -- the commands against a server that asks for a login ----------------------------------


def test_schemas_without_a_login_gets_one_line_that_says_how(server: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["schemas", "list", "--url", server])
    message = str(exc.value.code)
    assert "\n" not in message
    assert message.startswith(f"tidelake: the schema registry at {server} asks for a login (401)")
    assert "--http-user" in message and "TIDELAKE_HTTP_USER" in message


def test_schemas_with_a_wrong_password_says_whose_login_was_refused(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELAKE_HTTP_PASSWORD", "wrong")
    with pytest.raises(SystemExit) as exc:
        main(["schemas", "--http-user", USER, "list", "--url", server])
    assert "refused the login of 'alice' (401)" in str(exc.value.code)


def test_schemas_logs_in_from_the_environment(
    server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIDELAKE_HTTP_USER", USER)
    monkeypatch.setenv("TIDELAKE_HTTP_PASSWORD", PASSWORD)
    assert main(["schemas", "list", "--url", server]) == 0
    assert capsys.readouterr().out.split() == ["orders-value"]


def test_schemas_logs_in_from_a_command_config_file(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _props(tmp_path, f"basic.auth.user.info={USER}:{PASSWORD}\n")
    assert main(["schemas", "--command-config", conf, "list", "--url", server]) == 0
    assert capsys.readouterr().out.split() == ["orders-value"]


def test_a_login_in_the_url_still_works(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from urllib.parse import quote

    url = server.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")
    assert main(["schemas", "--url", url, "list"]) == 0
    assert capsys.readouterr().out.split() == ["orders-value"]


def test_tables_status_without_a_login_exits_1_with_the_hint_and_with_one_shows_the_rows(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tables", "status", "--http-url", server]) == 1
    err = capsys.readouterr().err
    assert f"the HTTP API at {server} asks for a login (401): pass --http-user" in err
    assert "Traceback" not in err
    secret = tmp_path / "pw"
    secret.write_text(PASSWORD)
    argv = ["tables", "status", "--http-url", server, "--http-user", USER]
    assert main([*argv, "--http-password-file", str(secret)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("object storage: ok")  # the storage line logs in too
    assert out.splitlines()[-1].split()[:3] == ["orders", "default.orders", "running"]


def test_cluster_status_without_a_login_exits_1_with_the_hint_and_with_one_shows_brokers(
    server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "status", "--http", server, "--sample-ms", "0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "asks for a login (401): pass --http-user" in err
    monkeypatch.setenv("TIDELAKE_HTTP_PASSWORD", PASSWORD)
    argv = ["cluster", "status", "--http", server, "--sample-ms", "0", "--http-user", USER]
    assert main(argv) == 0
    assert "cluster c1  controller: node 1" in capsys.readouterr().out
