"""``tidelake serve``: embedded defaults, config precedence, bad config, clean SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from confluent_kafka.admin import AdminClient

from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

ROOT = Path(__file__).resolve().parents[3]


def _run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def test_invalid_listen_address_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    r = _run_cli("serve", "--data-dir", str(tmp_path), "--kafka-listen", "nonsense")
    assert r.returncode == 2
    assert "kafka_listen" in r.stderr


def test_invalid_config_file_value_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "tidelake.toml"
    cfg.write_text("[broker]\ndefault_partitions = 0\n")
    r = _run_cli("serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2
    assert "broker.default_partitions" in r.stderr


def test_unknown_config_key_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "tidelake.toml"
    cfg.write_text("[broker]\nno_such_setting = 1\n")
    r = _run_cli("serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2
    assert "no_such_setting" in r.stderr


def test_missing_config_file_is_reported(tmp_path: Path) -> None:
    r = _run_cli("serve", "--config", str(tmp_path / "absent.toml"))
    assert r.returncode == 2 and "absent.toml" in r.stderr


def test_config_file_env_and_flags_apply_in_order(tmp_path: Path) -> None:
    cfg = tmp_path / "tidelake.toml"
    cfg.write_text("[broker]\ndefault_partitions = 4\nauto_create_topics = true\n")
    proc = TidelakeProcess(
        tmp_path / "data", config_file=cfg, env={"TIDELAKE_BROKER_DEFAULT_PARTITIONS": "5"}
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap, "log_level": 0})
        md = admin.list_topics("autocreated", timeout=15)  # Metadata auto-creates the topic
        assert len(md.topics["autocreated"].partitions) == 5  # env beats the file
        assert httpx.get(f"{proc.registry_url}/subjects", timeout=10).json() == []
        assert httpx.get(f"{proc.http_url}/v1/config", timeout=10).status_code == 200
    finally:
        assert proc.stop() == 0


def test_sigterm_shuts_down_cleanly_and_quickly(tmp_path: Path) -> None:
    proc = TidelakeProcess(tmp_path / "data").start()
    t0 = time.monotonic()
    code = proc.stop()
    assert code == 0
    assert time.monotonic() - t0 < 15
    assert "broker stopped" in proc.log_tail()


def test_every_command_has_help() -> None:
    top = _run_cli("--help")
    assert top.returncode == 0
    commands = [c for c in ("serve", "topics", "tables", "schemas") if c in top.stdout]
    assert "serve" in commands and "topics" in commands
    for c in commands:
        r = _run_cli(c, "--help")
        assert r.returncode == 0 and "usage" in r.stdout.lower()


def test_topics_cli_manages_topics_over_the_kafka_protocol(tmp_path: Path) -> None:
    proc = TidelakeProcess(tmp_path / "data").start()
    b = ["topics", "--bootstrap-server", proc.bootstrap]
    try:
        r = _run_cli(
            *b, "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000"
        )
        assert r.returncode == 0, r.stderr
        dup = _run_cli(*b, "create", "orders")
        assert dup.returncode == 1 and "already exists" in dup.stderr
        bad = _run_cli(*b, "create", "bad name!")
        assert bad.returncode == 1 and "bad name!" in bad.stderr
        assert "orders" in _run_cli(*b, "list").stdout.split()
        r = _run_cli(
            *b,
            "alter-config",
            "orders",
            "--set",
            "max.message.bytes=2048",
            "--delete",
            "retention.ms",
        )
        assert r.returncode == 0, r.stderr
        import json

        desc = json.loads(_run_cli(*b, "describe", "orders", "--json").stdout)
        assert len(desc["partitions"]) == 3
        assert desc["overrides"] == {"max.message.bytes": "2048"}
        r = _run_cli(*b, "alter-config", "orders", "--set", "retention.ms=abc")
        assert r.returncode == 1 and "retention.ms" in r.stderr
        assert _run_cli(*b, "delete", "orders").returncode == 0
        assert "orders" not in _run_cli(*b, "list").stdout.split()
    finally:
        proc.stop()


def test_default_ports_are_kafka_9092_registry_8081_http_8181() -> None:
    from api.settings import load_settings

    s = load_settings()
    assert (s.process.kafka_listen, s.process.registry_listen, s.process.http_listen) == (
        "127.0.0.1:9092",
        "127.0.0.1:8081",
        "127.0.0.1:8181",
    )
    assert str(s.data_dir) == "tidelake-data"
    assert free_port() > 0


def test_s3_read_buffers_are_sized_to_the_block_cache_and_read_ahead(tmp_path: Path) -> None:
    from api.settings import load_settings

    cfg = tmp_path / "tidelake.toml"
    cfg.write_text(
        'object_store_url = "s3://bucket/prefix"\n'
        "[storage]\nblock_cache_bytes = 64000000\nread_ahead_ranges = 2\n"
        "upload_size_bytes = 4000000\n"
    )
    opts = load_settings(cfg).object_store_options()
    assert opts["read_buffer_bytes"] == 64_000_000 + 3 * 4_000_000
    cfg.write_text('object_store_url = "file:///tmp/objects"\n')
    assert load_settings(cfg).object_store_options() == {"writeback_bytes": 64 * 1024}
    cfg.write_text(
        'object_store_url = "file:///tmp/objects"\n[storage]\nfile_object_writeback_bytes = 0\n'
    )
    assert load_settings(cfg).object_store_options() == {"writeback_bytes": 0}
    cfg.write_text('object_store_url = "memory://"\n')
    assert load_settings(cfg).object_store_options() == {}


def test_http_admin_api_lists_topics_and_serves_metrics(tmp_path: Path) -> None:
    from confluent_kafka.admin import NewTopic

    proc = TidelakeProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("metrics-topic", 2, 1)])["metrics-topic"].result(15)
        topics = httpx.get(f"{proc.http_url}/api/v1/topics", timeout=10).json()
        assert [t["name"] for t in topics] == ["metrics-topic"]
        assert len(topics[0]["partitions"]) == 2
        assert httpx.get(f"{proc.http_url}/api/v1/topics/nope", timeout=10).status_code == 404
        assert httpx.get(f"{proc.http_url}/healthz", timeout=10).json() == {"status": "ok"}
        text = httpx.get(f"{proc.http_url}/metrics", timeout=10).text
        assert 'tidelake_partition_high_watermark{partition="1",topic="metrics-topic"} 0' in text
        assert "/api/v1/topics" in httpx.get(f"{proc.http_url}/openapi.json", timeout=10).text
    finally:
        proc.stop()
