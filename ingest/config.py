"""Broker settings. Built by the process assembly and passed down."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

__all__ = ["BrokerConfig", "parse_hostport"]


def parse_hostport(value: str, key: str = "listen") -> tuple[str, int]:
    from ingest.errors import ConfigError

    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(key, f"expected HOST:PORT, got {value!r}")
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(key, f"port must be a number, got {port!r}") from None
    if not 0 <= p <= 65535:
        raise ConfigError(key, f"port out of range: {p}")
    return host.strip("[]"), p


class BrokerConfig(BaseModel):
    model_config = {"extra": "forbid"}

    node_id: int = 1
    cluster_id: str | None = None  # generated once and stored when None
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    auto_create_topics: bool = True
    default_partitions: int = Field(1, ge=1)
    default_replication_factor: int = Field(1, ge=1)
    max_request_bytes: int = Field(100 * 1024 * 1024, ge=1024)
    retention_check_interval_ms: int = Field(30_000, ge=100)
    group_min_session_timeout_ms: int = Field(6_000, ge=1)
    group_max_session_timeout_ms: int = Field(1_800_000, ge=1)
    group_initial_rebalance_delay_ms: int = Field(3_000, ge=0)
    fetch_max_wait_cap_ms: int = Field(30_000, ge=0)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not v:
            raise ValueError("must not be empty")
        return v

    @property
    def public_host(self) -> str:
        return self.advertised_host or self.host

    @property
    def public_port(self) -> int:
        return self.advertised_port or self.port
