"""Settings layering: defaults < config file < environment < flags, merged first and
validated once per section; errors name the full key."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from api.settings import load_settings, load_sync_targets
from catalog.config import CatalogType
from ingest.config import BrokerConfig
from ingest.errors import ConfigError
from ingest.s3stream.config import S3StreamConfig


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIDELAKE_"):
            monkeypatch.delenv(name)


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tidelake.toml"
    path.write_text(text)
    return path


def test_catalog_type_from_env_with_uri_from_the_file_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    s = load_settings(_toml(tmp_path, '[catalog]\nuri = "http://catalog:8181"\n'))
    assert s.catalog.type is CatalogType.REST
    assert s.catalog.uri == "http://catalog:8181"


def test_a_rest_catalog_without_uri_names_catalog_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, ""))
    assert err.value.key == "catalog.uri"
    assert "catalog.uri" in str(err.value)


# section, key, environment variable, file value (TOML), env value, flag value, read back
PRECEDENCE: list[tuple[str, str, str, str, str, Any]] = [
    (
        "",
        "http_listen",
        "TIDELAKE_HTTP_LISTEN",
        '"127.0.0.1:1001"',
        "127.0.0.1:1002",
        "127.0.0.1:1003",
    ),
    ("broker", "node_id", "TIDELAKE_BROKER_NODE_ID", "11", "12", 13),
    ("storage", "upload_interval_ms", "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS", "111", "112", 113),
    ("registry", "max_body_bytes", "TIDELAKE_REGISTRY_MAX_BODY_BYTES", "2001", "2002", 2003),
    ("catalog", "warehouse", "TIDELAKE_CATALOG_WAREHOUSE", '"file:///f"', "file:///e", "file:///c"),
    ("table_topic", "default_namespace", "TIDELAKE_TABLE_TOPIC_DEFAULT_NAMESPACE", '"f"', "e", "c"),
]


def _read(s: Any, section: str, key: str) -> Any:
    return getattr(s.process if not section else getattr(s, section), key)


@pytest.mark.parametrize(("section", "key", "env", "in_file", "in_env", "flag"), PRECEDENCE)
def test_flag_beats_env_beats_file_beats_default_in_every_section(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    section: str,
    key: str,
    env: str,
    in_file: str,
    in_env: str,
    flag: Any,
) -> None:
    dotted = f"{section}.{key}" if section else key
    default = _read(load_settings(), section, key)
    header = f"[{section}]\n" if section else ""
    cfg = _toml(tmp_path, f"{header}{key} = {in_file}\n")
    from_file = _read(load_settings(cfg), section, key)
    assert from_file != default
    monkeypatch.setenv(env, in_env)
    from_env = _read(load_settings(cfg), section, key)
    assert str(from_env) == in_env
    from_flag = _read(load_settings(cfg, overrides={dotted: flag}), section, key)
    assert from_flag == flag
    assert len({str(default), str(from_file), str(from_env), str(from_flag)}) == 4


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('s3_path_style = "sometimes"\n', "s3_path_style"),
        ('[broker]\nnode_id = "one"\n', "broker.node_id"),
        ("[storage]\nupload_size_bytes = [1]\n", "storage.upload_size_bytes"),
        ('[registry]\nmax_body_bytes = "big"\n', "registry.max_body_bytes"),
        ("[catalog]\nheaders = 3\n", "catalog.headers"),
        ('[table_topic]\nmax_rows_per_commit = "many"\n', "table_topic.max_rows_per_commit"),
    ],
)
def test_a_wrong_type_in_the_file_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, text))
    assert err.value.key == key


def test_a_wrong_value_in_the_environment_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_HEADERS", "{not json")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert err.value.key == "catalog.headers"


def _int_fields(cls: type[Any]) -> list[str]:
    return [n for n, f in cls.model_fields.items() if f.annotation is int]


@pytest.mark.parametrize(
    ("section", "cls"), [("broker", BrokerConfig), ("storage", S3StreamConfig)]
)
def test_every_field_of_the_room_config_is_read_from_file_and_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: str, cls: type[Any]
) -> None:
    # fields added to BrokerConfig / S3StreamConfig are picked up with no list to maintain
    names = [n for n in _int_fields(cls) if (section, n) != ("broker", "port")]
    assert names
    defaults = getattr(load_settings(), section)
    lines = [f"[{section}]"] + [f"{n} = {getattr(defaults, n) + 1}" for n in names]
    s = getattr(load_settings(_toml(tmp_path, "\n".join(lines) + "\n")), section)
    assert {n: getattr(s, n) for n in names} == {n: getattr(defaults, n) + 1 for n in names}
    for n in names:
        monkeypatch.setenv(f"TIDELAKE_{section.upper()}_{n.upper()}", str(getattr(defaults, n) + 2))
    s = getattr(load_settings(_toml(tmp_path, "\n".join(lines) + "\n")), section)
    assert {n: getattr(s, n) for n in names} == {n: getattr(defaults, n) + 2 for n in names}


def test_an_unknown_key_in_a_section_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_toml(tmp_path, "[broker]\nnode_idd = 3\n"))
    assert err.value.key == "broker.node_idd"


def test_a_sync_target_without_uri_is_rejected_even_when_the_platform_has_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_URI", "http://platform:8181")
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    with pytest.raises(ConfigError) as err:
        load_sync_targets([{"type": "glue", "glue_region": "eu-west-1"}, {"type": "rest"}])
    assert err.value.key == "sync.targets[1].uri"
    assert "TIDELAKE_CATALOG" not in str(err.value)


def test_a_sync_target_takes_only_what_its_entry_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TOKEN", "platform-secret")
    monkeypatch.setenv("TIDELAKE_CATALOG_WAREHOUSE", "s3://platform/wh")
    monkeypatch.setenv("TIDELAKE_CATALOG_HEADERS", '{"x-platform": "1"}')
    [target] = load_sync_targets([{"type": "rest", "uri": "http://other:8181"}])
    assert target.uri == "http://other:8181"
    assert (target.token, target.warehouse, target.headers) == (None, None, {})
    assert target.name == "rest-0"


def test_a_sync_target_with_a_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_sync_targets([{"type": "rest", "uri": "http://x", "headers": "nope"}])
    assert err.value.key == "sync.targets[0].headers"
