"""Process settings: defaults < TOML config file < environment < command-line flags.

Each room keeps its own settings class (``BrokerConfig``, ``S3StreamConfig``,
``RegistrySettings``, ``CatalogSettings``); this module builds them all once,
in ``main()``, and the process assembly passes them down. Invalid settings
raise :class:`ingest.errors.ConfigError` naming the key.

Layering: for each section the values of every layer are merged key by key
(defaults derived from ``data_dir`` < the file's table < the section's
environment variables < flags; a higher layer replaces a key's whole value),
and only then validated, once. So a check that spans keys (``catalog.type =
rest`` needs ``catalog.uri``) sees every layer, and a section picks up every
field of its class with no list kept here. Environment variables are decoded
by pydantic-settings' own ``EnvSettingsSource`` (JSON for maps and lists).
pydantic-settings' TOML source is not used: it reads one table per class and
the file mixes top-level keys with sections.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

from pydantic import BaseModel, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from api.http_auth import HttpSettings
from api.metrics.settings import MetricsSettings
from catalog.config import CatalogSettings, CatalogType
from ingest.cluster.config import ClusterConfig
from ingest.config import BrokerConfig, parse_hostport
from ingest.errors import ConfigError
from ingest.s3stream.config import S3StreamConfig
from schema_registry.app import RegistrySettings
from table_topic.settings import TableTopicSettings

__all__ = [
    "ProcessSettings",
    "Settings",
    "cluster_defaults",
    "load_section",
    "load_settings",
    "load_sync_targets",
    "shared_metadata",
    "unknown_environment",
]

M = TypeVar("M", bound=BaseModel)


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


# Each section of the file, the class that holds it; the environment prefix is
# the class's own (BaseSettings) or TIDELAKE_<SECTION>_.
_SECTIONS: dict[str, type[BaseModel]] = {
    "broker": BrokerConfig,
    "storage": S3StreamConfig,
    "registry": RegistrySettings,
    "catalog": CatalogSettings,
    "table_topic": TableTopicSettings,
    "cluster": ClusterConfig,
    "metrics": MetricsSettings,
    "http": HttpSettings,
}


class _SyncTarget(CatalogSettings):
    """A ``[[sync.targets]]`` entry: only what the entry says. The platform's
    ``TIDELAKE_CATALOG_*`` variables describe the platform's catalog, not a target."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


@dataclass(frozen=True)
class Settings:
    process: ProcessSettings
    broker: BrokerConfig
    storage: S3StreamConfig
    registry: RegistrySettings
    catalog: CatalogSettings
    table_topic: TableTopicSettings
    config_file: Path | None = None
    cluster: ClusterConfig = field(default_factory=lambda: ClusterConfig.model_validate({}))
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    http: HttpSettings = field(default_factory=HttpSettings)

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
        st = self.storage
        if self.object_store_url.startswith("file:"):
            return {"writeback_bytes": st.file_object_writeback_bytes}
        if not self.object_store_url.startswith("s3://"):
            return {}
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


def _join(section: str, key: str) -> str:
    return f"{section}.{key}" if section and key else (section or key)


def _env_prefix(cls: type[BaseModel], section: str) -> str:
    prefix = cls.model_config.get("env_prefix") if issubclass(cls, BaseSettings) else None
    return str(prefix or f"TIDELAKE_{section.upper()}_")


def _config_error(
    section: str, cls: type[BaseModel], env_prefix: str, exc: ValidationError
) -> ConfigError:
    """The first error, keyed by its full dotted name. A check over the whole section
    (no location) names keys by their environment variables: those become keys."""
    err = exc.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden" and loc:
        return ConfigError(_join(section, loc), _unknown_key(section, loc, list(cls.model_fields)))
    if not loc:
        found: list[tuple[int, str]] = []
        for name in cls.model_fields:
            pattern = re.compile(rf"\b{re.escape(f'{env_prefix}{name}'.upper())}\b")
            match = pattern.search(msg)
            if match is not None:
                found.append((match.start(), name))
                msg = pattern.sub(_join(section, name), msg)
        if found:
            loc = min(found)[1]
    return ConfigError(_join(section, loc), msg)


def _unknown_key(section: str, key: str, valid: list[str]) -> str:
    """``unknown key 'broker.nde_id'; did you mean 'broker.node_id'?``"""
    if not section:  # the top level also holds the sections
        valid = valid + [*_SECTIONS, *_MAINTENANCE_SECTIONS]
    message = f"unknown key {_join(section, key)!r}"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return message + (f"; did you mean {_join(section, close[0])!r}?" if close else "")


# TIDELAKE_* variables that are not settings but are read all the same
# VENV: scripts/dev.sh; HTTP_USER/PASSWORD/CA_FILE: the CLI's login to the
# HTTP services (api/commands/http_client.py), not settings of the server
_OTHER_VARIABLES = (
    "TIDELAKE_CONFIG",
    "TIDELAKE_VENV",
    "TIDELAKE_HTTP_USER",
    "TIDELAKE_HTTP_PASSWORD",
    "TIDELAKE_HTTP_CA_FILE",
)
_OTHER_PREFIXES = ("TIDELAKE_TEST_", "TIDELAKE_FUZZ_")


def _known_variables() -> list[str]:
    from spark.config import SparkSettings
    from spark.policy import MaintenancePolicy

    classes: list[tuple[type[BaseModel], str]] = [(ProcessSettings, "")]
    classes += [(cls, name) for name, cls in _SECTIONS.items()]
    classes += [(SparkSettings, "spark"), (MaintenancePolicy, "maintenance")]
    return [
        f"{_env_prefix(cls, name)}{field}".upper()
        for cls, name in classes
        for field in cls.model_fields
    ] + list(_OTHER_VARIABLES)


def unknown_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ``TIDELAKE_*`` variable that matches no setting (a typo is
    otherwise silently ignored), with the nearest valid name when there is one."""
    env = os.environ if environ is None else environ
    names = sorted(
        n.upper()
        for n in env
        if n.upper().startswith("TIDELAKE_") and not n.upper().startswith(_OTHER_PREFIXES)
    )
    if not names:
        return []
    known = _known_variables()
    warnings: list[str] = []
    for name in names:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.append(f"environment variable {name} matches no setting and is ignored{hint}")
    return warnings


def _from_env(cls: type[BaseModel], section: str) -> dict[str, Any]:
    """The fields of ``cls`` set in the environment, decoded (JSON for maps and
    lists) but not validated. Works for plain models too: the source only reads
    the class's fields and config."""
    prefix = _env_prefix(cls, section)
    source = EnvSettingsSource(
        cast(type[BaseSettings], cls), env_prefix=prefix, case_sensitive=False
    )
    try:
        return dict(source())
    except SettingsError as exc:
        match = re.search(r'field "([^"]+)"', str(exc))
        name = match.group(1) if match else ""
        raise ConfigError(
            _join(section, name),
            f"{(prefix + name).upper()} cannot be read: {exc.__cause__ or exc}",
        ) from None


def load_section(
    cls: type[M],
    section: str,
    file_section: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> M:
    """One section: ``defaults`` < ``file_section`` < environment < ``flags``, merged
    key by key, then validated once. Raises ConfigError naming ``section.key``."""
    data: dict[str, Any] = dict(defaults or {})
    data.update(file_section or {})
    data.update(_from_env(cls, section))
    data.update(flags or {})
    try:
        # a BaseSettings reads its environment again here: the same values that
        # ``data`` already holds at a higher priority
        return cls.model_validate(data)
    except ValidationError as exc:
        raise _config_error(section, cls, _env_prefix(cls, section), exc) from None


def load_sync_targets(entries: Any) -> list[CatalogSettings]:
    """``[[sync.targets]]`` of the maintenance config: each entry as it is written
    (no ``TIDELAKE_CATALOG_*`` from the environment); ``name`` defaults to
    ``<type>-<index>``. Raises ConfigError naming ``sync.targets[i].key``."""
    if not isinstance(entries, list):
        raise ConfigError("sync.targets", "must be an array of tables ([[sync.targets]])")
    targets: list[CatalogSettings] = []
    for index, raw in enumerate(entries):
        key = f"sync.targets[{index}]"
        if not isinstance(raw, dict):
            raise ConfigError(key, "must be a table")
        data = {"name": f"{raw.get('type', 'target')}-{index}", **raw}
        try:
            targets.append(_SyncTarget(**data))
        except ValidationError as exc:
            raise _config_error(key, CatalogSettings, "TIDELAKE_CATALOG_", exc) from None
    return targets


def shared_metadata(metadata_url: str | None) -> bool:
    """A PostgreSQL metadata store: the brokers sharing it form a cluster."""
    return urlsplit(metadata_url or "").scheme.lower() in ("postgresql", "postgres")


def _with_query(url: str, scheme: str, query: Mapping[str, str]) -> str:
    parts = urlsplit(url)
    return parts._replace(scheme=scheme, query=urlencode(query)).geturl()


def cluster_defaults(process: ProcessSettings) -> dict[str, dict[str, Any]]:
    """What the brokers of a cluster must share, derived from ``metadata_url`` and
    ``object_store_url``: the schema registry in its own PostgreSQL schema of the
    metadata database, and the platform's SQL catalog in the metadata database
    (its ``iceberg_*`` tables next to the metadata's) with the warehouse on the
    shared object store. Only defaults: any value the user set wins."""
    url = process.metadata_url or ""
    query = dict(parse_qsl(urlsplit(url).query))
    schema = query.pop("schema", None)
    registry_query = {**query, "schema": f"{schema}_registry" if schema else "tidelake_registry"}
    catalog_query = {**query, **({"options": f"-csearch_path={schema}"} if schema else {})}
    objects = process.object_store_url or ""
    catalog: dict[str, Any] = {
        "uri": _with_query(url, "postgresql+psycopg2", catalog_query),
        "warehouse": f"{objects.rstrip('/')}/warehouse",
    }
    if objects.startswith("s3://"):
        for key, value in (
            ("s3_endpoint", process.s3_endpoint_url),
            ("s3_region", process.s3_region),
            ("s3_access_key_id", process.s3_access_key_id),
            ("s3_secret_access_key", process.s3_secret_access_key),
        ):
            if value:
                catalog[key] = value
    return {
        "registry": {"store_url": _with_query(url, "postgresql", registry_query)},
        "catalog": catalog,
    }


def _split_flags(flags: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Top-level flags and per-section flags from keys such as ``broker.node_id``."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in flags.items():
        if value is None:
            continue
        section, dot, name = key.partition(".")
        if dot and section in _SECTIONS:
            sections.setdefault(section, {})[name] = value
        else:
            top[key] = value
    return top, sections


def load_settings(
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    **flags: Any,
) -> Settings:
    """Build every room's settings.

    ``flags`` are top-level keys given on the command line; ``overrides`` are any
    keys, dotted for sections (``broker.node_id``), also from the command line
    (``--set``). Both beat the environment, which beats the file.
    """
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
    sections: dict[str, Any] = {k: file_data.pop(k) for k in _SECTIONS if k in file_data}
    # Sections read by `tidelake maintenance` (Spark, policy, catalog sync) may
    # live in the same file; serve does not use them.
    for name in _MAINTENANCE_SECTIONS:
        file_data.pop(name, None)
    for name, value in sections.items():
        if not isinstance(value, dict):
            raise ConfigError(name, "must be a table")
    top_flags, section_flags = _split_flags({**flags, **(overrides or {})})
    process = load_section(ProcessSettings, "", file_data, flags=top_flags)
    kafka_host, kafka_port = parse_hostport(process.kafka_listen, "kafka_listen")
    parse_hostport(process.registry_listen, "registry_listen")
    parse_hostport(process.http_listen, "http_listen")
    data_dir = process.data_dir
    # defaults that follow data_dir; the broker listens where kafka_listen says
    derived_defaults: dict[str, dict[str, Any]] = {
        "storage": {"wal_dir": str(data_dir / "wal")},
        "registry": {"store_url": f"sqlite:///{(data_dir / 'schema-registry.db').resolve()}"},
        "catalog": {"data_dir": str(data_dir)},
    }
    derived_flags: dict[str, dict[str, Any]] = {
        "broker": {"host": kafka_host, "port": kafka_port},
    }
    built: dict[str, BaseModel] = {}

    def build(name: str, defaults: Mapping[str, Any] | None) -> BaseModel:
        return load_section(
            _SECTIONS[name],
            name,
            sections.get(name),
            defaults=defaults,
            flags={**derived_flags.get(name, {}), **section_flags.get(name, {})},
        )

    # a cluster's brokers share one registry and one catalog, unless told otherwise
    shared = cluster_defaults(process) if shared_metadata(process.metadata_url) else {}
    derived_defaults["registry"].update(shared.get("registry", {}))
    for name in _SECTIONS:
        built[name] = build(name, derived_defaults.get(name))
    if shared and cast(CatalogSettings, built["catalog"]).type is CatalogType.SQL:
        built["catalog"] = build("catalog", {**derived_defaults["catalog"], **shared["catalog"]})
    return Settings(
        process,
        cast(BrokerConfig, built["broker"]),
        cast(S3StreamConfig, built["storage"]),
        cast(RegistrySettings, built["registry"]),
        cast(CatalogSettings, built["catalog"]),
        cast(TableTopicSettings, built["table_topic"]),
        path,
        cast(ClusterConfig, built["cluster"]),
        metrics=cast(MetricsSettings, built["metrics"]),
        http=cast(HttpSettings, built["http"]),
    )
