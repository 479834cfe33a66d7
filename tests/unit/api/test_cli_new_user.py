"""What a new user meets first on the command line: config mistakes named in one
line with the nearest valid key, misspelt ``TIDELAKE_*`` variables warned about,
and every command finding the platform the same way (``--config``, ``--data-dir``,
``TIDELAKE_*``)."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

import pytest

from api.cli import build_parser, main
from api.settings import load_settings, unknown_environment
from ingest.errors import ConfigError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIDELAKE_"):
            monkeypatch.delenv(name)


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tidelake.toml"
    path.write_text(text)
    return path


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(argv)


# -- unknown keys and variables ------------------------------------------------


def test_an_unknown_file_key_is_named_with_the_nearest_valid_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, "[broker]\nnde_id = 2\n"))
    assert "unknown key 'broker.nde_id'" in str(err.value)
    assert "did you mean 'broker.node_id'?" in str(err.value)
    assert "Extra inputs" not in str(err.value)


def test_an_unknown_top_level_key_suggests_a_key_or_a_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, 'kafka_listn = "127.0.0.1:1"\n'))
    assert "unknown key 'kafka_listn'; did you mean 'kafka_listen'?" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, "[brokers]\nnode_id = 2\n"))
    assert "did you mean 'broker'?" in str(err.value)


def test_an_unknown_key_with_nothing_near_is_still_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, "[storage]\nzzz = 1\n"))
    assert str(err.value).endswith("unknown key 'storage.zzz'")


def test_misspelt_environment_variables_are_warned_about_with_the_nearest_name() -> None:
    warnings = unknown_environment(
        {
            "TIDELAKE_BROKER_NODEID": "2",
            "TIDELAKE_KAFKA_LISTEN": "127.0.0.1:1",  # a setting
            "TIDELAKE_SPARK_MASTER": "local[1]",  # read by sql/maintenance
            "TIDELAKE_MAINTENANCE_INTERVAL_SECONDS": "5",
            "TIDELAKE_CONFIG": "x.toml",
            "TIDELAKE_HTTP_USER": "alice",  # the CLI's login to the HTTP services
            "TIDELAKE_HTTP_PASSWORD": "secret",
            "TIDELAKE_HTTP_CA_FILE": "ca.pem",
            "tidelake_catalog_type": "sql",  # case does not matter, as for the settings
            "TIDELAKE_NOTHING_LIKE_IT": "1",
            "PATH": "/bin",
        }
    )
    assert warnings == [
        "environment variable TIDELAKE_BROKER_NODEID matches no setting and is ignored; "
        "did you mean TIDELAKE_BROKER_NODE_ID?",
        "environment variable TIDELAKE_NOTHING_LIKE_IT matches no setting and is ignored",
    ]


def test_every_command_prints_the_environment_warning_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from api.commands.serve import settings_from_args

    monkeypatch.setenv("TIDELAKE_REGISTRY_LISTN", "127.0.0.1:1")
    settings_from_args(_parse("tables", "list", "--data-dir", str(tmp_path)))
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "TIDELAKE_REGISTRY_LISTN" in err and "TIDELAKE_REGISTRY_LISTEN" in err


# -- invalid config: one line, every command ---------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("tables", "list"),
        ("tables", "describe", "default.t"),
        ("tables", "snapshots", "default.t"),
        ("tables", "preview", "default.t"),
        ("tables", "status"),
        ("topics", "list"),
        ("topics", "describe", "t"),
        ("schemas", "list"),
    ],
)
def test_an_invalid_config_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    cfg = _toml(tmp_path, "[broker]\nnde_id = 2\n")
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--config", str(cfg)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "unknown key 'broker.nde_id'" in err


# -- finding the platform -----------------------------------------------------


def test_topics_finds_the_broker_from_the_environment_the_file_and_the_data_dir_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api.commands.topics import _bootstrap

    assert _bootstrap(_parse("topics", "list")) == "127.0.0.1:9092"
    monkeypatch.setenv("TIDELAKE_KAFKA_LISTEN", "0.0.0.0:19092")
    assert _bootstrap(_parse("topics", "list")) == "127.0.0.1:19092"
    cfg = _toml(tmp_path, 'kafka_listen = "127.0.0.1:29092"\n')
    monkeypatch.delenv("TIDELAKE_KAFKA_LISTEN")
    assert _bootstrap(_parse("topics", "--config", str(cfg), "list")) == "127.0.0.1:29092"
    assert _bootstrap(_parse("topics", "describe", "t", "--config", str(cfg))) == "127.0.0.1:29092"
    args = _parse("topics", "--set", "kafka_listen=127.0.0.1:39092", "list")
    assert _bootstrap(args) == "127.0.0.1:39092"
    # an explicit broker wins
    args = _parse("topics", "-b", "h:1", "--config", str(cfg), "list")
    assert _bootstrap(args) == "h:1"


def test_topics_create_keeps_config_for_topic_configs_and_takes_the_file_before_the_action(
    tmp_path: Path,
) -> None:
    from api.commands.topics import _bootstrap

    cfg = _toml(tmp_path, 'kafka_listen = "127.0.0.1:29092"\n')
    args = _parse(
        "topics", "--config", str(cfg), "create", "t", "--config", "retention.ms=1", "-p", "2"
    )
    assert args.config == ["retention.ms=1"]
    assert _bootstrap(args) == "127.0.0.1:29092"
    args = _parse("topics", "alter-config", "t", "--set", "retention.ms=1", "--config", str(cfg))
    assert args.set == ["retention.ms=1"] and _bootstrap(args) == "127.0.0.1:29092"


def test_schemas_finds_the_registry_from_the_environment_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api.commands.schemas import _url

    assert _url(_parse("schemas", "list")) == "http://127.0.0.1:8081"
    monkeypatch.setenv("TIDELAKE_REGISTRY_LISTEN", "127.0.0.1:18081")
    assert _url(_parse("schemas", "list")) == "http://127.0.0.1:18081"
    cfg = _toml(tmp_path, 'registry_listen = "127.0.0.1:28081"\n')
    monkeypatch.delenv("TIDELAKE_REGISTRY_LISTEN")
    assert _url(_parse("schemas", "--config", str(cfg), "list")) == "http://127.0.0.1:28081"
    assert _url(_parse("schemas", "--url", "http://r:1", "list")) == "http://r:1"


def test_tables_status_finds_the_http_api_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TIDELAKE_HTTP_LISTEN", f"127.0.0.1:{port}")
    assert main(["tables", "status"]) == 1
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


# -- a taken port -------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("kafka_listen", "Kafka listener"),
        ("registry_listen", "schema registry"),
        ("http_listen", "HTTP API"),
    ],
)
def test_a_taken_port_is_named_in_one_line(tmp_path: Path, key: str, what: str) -> None:
    from api.commands.serve import _taken_listener

    ports = []
    socks = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
        socks.append(s)
    for s in socks:
        s.close()
    listens = dict(zip(("kafka_listen", "registry_listen", "http_listen"), ports, strict=True))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", listens[key]))
        taken.listen()
        settings = load_settings(
            None, data_dir=tmp_path, **{k: f"127.0.0.1:{p}" for k, p in listens.items()}
        )
        assert _taken_listener(settings) == (
            f"cannot start the {what} on 127.0.0.1:{listens[key]} ({key}): address already in use"
        )
    assert _taken_listener(settings) is None


# -- tables status ---------------------------------------------------------------


def test_tables_status_rounds_files_per_commit(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = {
        "/api/v1/table-topics": [
            {"topic": "t", "table": "default.t", "state": "running", "files_per_commit": 2 / 3}
        ],
        "/api/v1/storage": {"state": "ok"},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            data = json.dumps(body[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        # no broker here: the dead-letter topics cannot be asked (-b points nowhere)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            nowhere = f"127.0.0.1:{s.getsockname()[1]}"
        assert (
            main(["tables", "status", "--http-url", url, "--set", f"kafka_listen={nowhere}"]) == 0
        )
        out = capsys.readouterr().out
        row = out.splitlines()[-1].split()
        assert row[:3] == ["t", "default.t", "running"] and row[-1] == "0.7"
    finally:
        server.shutdown()
        thread.join()


def test_with_named_listeners_the_taken_port_check_looks_at_them(tmp_path: Path) -> None:
    from api.commands.serve import _taken_listener

    with socket.socket() as taken, socket.socket() as unused:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        unused.bind(("127.0.0.1", 0))
        kafka_port = unused.getsockname()[1]
        unused.close()
        port = taken.getsockname()[1]
        settings = load_settings(
            None,
            {"broker.listeners": [f"PLAINTEXT://127.0.0.1:{port}"]},
            data_dir=tmp_path,
            kafka_listen=f"127.0.0.1:{kafka_port}",
            registry_listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
        )
        assert _taken_listener(settings) == (
            f"cannot start the Kafka listener on 127.0.0.1:{port} (broker.listeners): "
            "address already in use"
        )
