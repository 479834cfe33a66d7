"""Process settings: defaults < TOML config file < environment < command-line flags.

Each room keeps its own settings class (``BrokerConfig``, ``S3StreamConfig``,
``RegistrySettings``, ``CatalogSettings``); this module builds them all once,
in ``main()``, and the process assembly passes them down. Invalid settings
raise :class:`ingest.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from catalog.config import CatalogSettings
from ingest.config import BrokerConfig, parse_hostport
from ingest.errors import ConfigError
from ingest.s3stream.config import S3StreamConfig
from schema_registry.app import RegistrySettings
from table_topic.settings import TableTopicSettings

__all__ = ["ProcessSettings", "Settings", "load_settings"]


_MAINTENANCE_SECTIONS = ("spark", "policy", "sync", "maintenance")


class ProcessSettings(BaseSettings):
    """Top-level keys (env prefix ``TIDELAKE_``)."""

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_", extra="forbid")

    data_dir: Path = Path("./tidelake-data")
    kafka_listen: str = "127.0.0.1:9092"
    registry_listen: str = "127.0.0.1:8081"
    http_listen: str = "127.0.0.1:8181"
    metadata_url: str | None = None  # default sqlite:///<data_dir>/metadata.db
    object_store_url: str | None = None  # default file://<data_dir>/objects
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    s3_path_style: bool = True
    log_level: str = "INFO"


class _BrokerEnv(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDELAKE_BROKER_", extra="ignore")


class _StorageEnv(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDELAKE_STORAGE_", extra="ignore")


@dataclass(frozen=True)
class Settings:
    process: ProcessSettings
    broker: BrokerConfig
    storage: S3StreamConfig
    registry: RegistrySettings
    catalog: CatalogSettings
    table_topic: TableTopicSettings
    config_file: Path | None = None

    @property
    def data_dir(self) -> Path:
        return self.process.data_dir

    @property
    def metadata_url(self) -> str:
        return self.process.metadata_url or f"sqlite:///{(self.data_dir / 'metadata.db').resolve()}"

    @property
    def object_store_url(self) -> str:
        return self.process.object_store_url or f"file://{(self.data_dir / 'objects').resolve()}"

    def object_store_options(self) -> dict[str, Any]:
        p = self.process
        if not self.object_store_url.startswith("s3://"):
            return {}
        st = self.storage
        opts = {
            "endpoint_url": p.s3_endpoint_url,
            "region": p.s3_region,
            "access_key_id": p.s3_access_key_id,
            "secret_access_key": p.s3_secret_access_key,
            "path_style": p.s3_path_style,
            # recycled read buffers: what the block cache holds plus the
            # read-ahead in flight
            "read_buffer_bytes": st.block_cache_bytes
            + (st.read_ahead_ranges + 1) * st.upload_size_bytes,
        }
        return {k: v for k, v in opts.items() if v is not None}


def _key_of(prefix: str, exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    key = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
    return key, err["msg"]


def _env_over(
    cls: type[BaseModel], env_cls: type[BaseSettings], section: dict[str, Any]
) -> dict[str, Any]:
    """Values from the TOML section with ``env_cls``'s environment variables on top."""
    data = dict(section)
    prefix = env_cls.model_config.get("env_prefix", "")
    for name in cls.model_fields:
        raw = os.environ.get(f"{prefix}{name}".upper())
        if raw is not None:
            data[name] = raw
    return data


def _env_settings_over(cls: type[BaseSettings], section: dict[str, Any]) -> BaseSettings:
    """A BaseSettings built from TOML values, with its own environment variables winning."""
    env_only = cls()
    data = dict(section)
    for name in env_only.model_fields_set:
        data[name] = getattr(env_only, name)
    return cls(**data)


def load_settings(config_file: str | Path | None = None, **flags: Any) -> Settings:
    """Build every room's settings. ``flags`` are top-level keys given on the command line."""
    file_data: dict[str, Any] = {}
    path = Path(config_file) if config_file else None
    if path is None and os.environ.get("TIDELAKE_CONFIG"):
        path = Path(os.environ["TIDELAKE_CONFIG"])
    if path is not None:
        try:
            file_data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError("config", f"config file {str(path)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    sections: dict[str, Any] = {
        k: file_data.pop(k)
        for k in ("broker", "storage", "registry", "catalog", "table_topic")
        if k in file_data
    }
    # Sections read by `tidelake maintenance` (Spark, policy, catalog sync) may
    # live in the same file; serve does not use them.
    for name in _MAINTENANCE_SECTIONS:
        file_data.pop(name, None)
    for name, value in sections.items():
        if not isinstance(value, dict):
            raise ConfigError(name, "must be a table")
    try:
        env_proc = ProcessSettings()
        top = dict(file_data)
        for name in env_proc.model_fields_set:
            top[name] = getattr(env_proc, name)
        top.update({k: v for k, v in flags.items() if v is not None})
        process = ProcessSettings(**top)
    except ValidationError as exc:
        raise ConfigError(*_key_of("", exc)) from None
    kafka_host, kafka_port = parse_hostport(process.kafka_listen, "kafka_listen")
    parse_hostport(process.registry_listen, "registry_listen")
    parse_hostport(process.http_listen, "http_listen")
    data_dir = process.data_dir
    try:
        bdata = _env_over(BrokerConfig, _BrokerEnv, sections.get("broker", {}))
        bdata["host"], bdata["port"] = kafka_host, kafka_port
        broker = BrokerConfig(**bdata)
    except ValidationError as exc:
        raise ConfigError(*_key_of("broker", exc)) from None
    try:
        sdata = _env_over(S3StreamConfig, _StorageEnv, sections.get("storage", {}))
        sdata.setdefault("wal_dir", str(data_dir / "wal"))
        storage = S3StreamConfig(**sdata)
    except ValidationError as exc:
        raise ConfigError(*_key_of("storage", exc)) from None
    try:
        rdata = dict(sections.get("registry", {}))
        rdata.setdefault("store_url", f"sqlite:///{(data_dir / 'schema-registry.db').resolve()}")
        registry = _env_settings_over(RegistrySettings, rdata)
    except ValidationError as exc:
        raise ConfigError(*_key_of("registry", exc)) from None
    try:
        cdata = dict(sections.get("catalog", {}))
        cdata.setdefault("data_dir", str(data_dir))
        catalog = _env_settings_over(CatalogSettings, cdata)
    except ValidationError as exc:
        raise ConfigError(*_key_of("catalog", exc)) from None
    try:
        table_topic = _env_settings_over(
            TableTopicSettings, dict(sections.get("table_topic") or {})
        )
    except ValidationError as exc:
        raise ConfigError(*_key_of("table_topic", exc)) from None
    return Settings(process, broker, storage, registry, catalog, table_topic, path)  # type: ignore[arg-type]
