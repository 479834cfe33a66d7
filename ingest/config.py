"""Broker settings. Built by the process assembly and passed down."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

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
    rack: str | None = None  # the availability zone or rack, shown to clients (Kafka's broker.rack)
    auto_create_topics: bool = True
    default_partitions: int = Field(1, ge=1)
    default_replication_factor: int = Field(1, ge=1)
    max_request_bytes: int = Field(100 * 1024 * 1024, ge=1024)
    retention_check_interval_ms: int = Field(30_000, ge=100)
    # the log cleaner of compacted topics (Kafka's log.cleaner.enable,
    # log.cleaner.backoff.ms, log.cleaner.dedupe.buffer.size)
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = Field(15_000, ge=10)
    log_cleaner_dedupe_buffer_size: int = Field(128 * 1024 * 1024, ge=1024)
    log_cleaner_io_max_bytes_per_second: int = Field(0, ge=0)  # 0: unbounded
    group_min_session_timeout_ms: int = Field(6_000, ge=1)
    group_max_session_timeout_ms: int = Field(1_800_000, ge=1)
    group_initial_rebalance_delay_ms: int = Field(3_000, ge=0)
    # the consumer group protocol (KIP-848): Kafka's group.consumer.session.timeout.ms
    # and group.consumer.heartbeat.interval.ms
    group_consumer_session_timeout_ms: int = Field(45_000, ge=1)
    group_consumer_heartbeat_interval_ms: int = Field(5_000, ge=1)
    # Kafka's group.consumer.migration.policy: which online conversions between
    # classic and consumer groups are allowed (case-insensitive, as Kafka's)
    group_consumer_migration_policy: Literal[
        "bidirectional", "upgrade", "downgrade", "disabled"
    ] = "bidirectional"
    fetch_max_wait_cap_ms: int = Field(30_000, ge=0)
    # Kafka's transaction.max.timeout.ms: a producer may ask for no longer one
    transaction_max_timeout_ms: int = Field(900_000, ge=1)
    # Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction_abort_interval_ms: int = Field(10_000, ge=10)
    # Kafka's connections.max.idle.ms: a connection with nothing in flight and
    # no traffic for this long is closed (0: never).
    connections_max_idle_ms: int = Field(600_000, ge=0)
    # A request whose first bytes arrived but which is not complete this long
    # after is dropped with its connection (0: no limit).
    request_read_timeout_ms: int = Field(30_000, ge=0)
    # Bytes reserved for requests being read, across all connections; past
    # it, connections in the middle of a large request stop being read until
    # memory frees (one request larger than this is read alone).
    max_buffered_request_bytes: int = Field(256 * 1024 * 1024, ge=1024)
    # On SIGTERM: how long requests in flight get to finish and be answered.
    shutdown_drain_timeout_ms: int = Field(10_000, ge=0)
    # Security (Kafka's listeners / advertised.listeners /
    # listener.security.protocol.map / ssl.* / sasl.enabled.mechanisms).
    # Without ``listeners`` the broker has one PLAINTEXT listener on host:port.
    listeners: list[str] = Field(default_factory=list)  # ["SASL_SSL://127.0.0.1:9094", ...]
    advertised_listeners: list[str] = Field(default_factory=list)
    listener_security_protocol_map: dict[str, str] = Field(default_factory=dict)
    ssl_certfile: str | None = None  # PEM: the broker's certificate (chain)
    ssl_keyfile: str | None = None  # PEM: its private key
    ssl_cafile: str | None = None  # PEM: CAs that sign client certificates (mTLS)
    ssl_client_auth: Literal["none", "requested", "required"] = "none"
    # per listener name, as Kafka's listener.name.<name>.ssl.client.auth
    listener_ssl_client_auth: dict[str, Literal["none", "requested", "required"]] = Field(
        default_factory=dict
    )
    # Kafka's inter.broker.listener.name: the listener this broker uses to
    # reach the other brokers of its cluster (transaction markers, console
    # reads, rack-routed produce). Default: the first PLAINTEXT listener, else
    # the default (first) one. When it needs SASL or TLS, the keys below say
    # how to pass it; a cluster broker missing them refuses to start.
    inter_broker_listener_name: str | None = None
    # Kafka's sasl.mechanism.inter.broker.protocol and the listener's JAAS
    # login: how this broker authenticates to the others' inter-broker listener
    inter_broker_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    inter_broker_sasl_username: str | None = None
    inter_broker_sasl_password: SecretStr | None = (
        None  # or TIDELAKE_BROKER_INTER_BROKER_SASL_PASSWORD
    )
    # TLS to the others' inter-broker listener: the CAs that sign their
    # certificates (default: ssl_cafile), this broker's client certificate
    # when that listener requires one (mTLS), and the host name check
    inter_broker_ssl_cafile: str | None = None
    inter_broker_ssl_certfile: str | None = None
    inter_broker_ssl_keyfile: str | None = None
    inter_broker_ssl_check_hostname: bool = True
    # Kafka's connection.failed.authentication.delay.ms: a connection whose
    # authentication failed is closed this long after the error response
    connection_failed_authentication_delay_ms: int = Field(100, ge=0)
    # Kafka's super.users ("User:admin"): the principals that may describe and
    # alter SCRAM credentials over the Kafka protocol (nobody by default; the
    # `tidelake users` command writes the metadata store directly)
    super_users: list[str] = Field(default_factory=list)
    # Kafka's authorizer.class.name: "none" (everyone may do everything) or
    # "acl" (ACLs are checked on every API; super_users pass every check)
    authorizer: Literal["none", "acl"] = "none"
    # Kafka's allow.everyone.if.no.acl.found: with the authorizer on, a
    # resource no ACL names is open to everyone (default: closed)
    allow_everyone_if_no_acl_found: bool = False
    # how often a broker reloads ACLs another broker (or `tidelake acls`) changed
    acl_refresh_interval_ms: int = Field(1_000, ge=10)
    # Kafka's quota.window.num / quota.window.size.seconds: a client quota's
    # rate is measured over this many windows of this length (quotas are set
    # with AlterClientQuotas and apply within acl_refresh_interval_ms)
    quota_window_num: int = Field(11, ge=2)
    quota_window_size_ms: int = Field(1_000, ge=10)
    sasl_enabled_mechanisms: list[str] = Field(
        default_factory=lambda: ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
    )
    # SASL OAUTHBEARER (KIP-255): JWTs checked against a JWKS file or URL
    # (Kafka's sasl.oauthbearer.* keys); enable with "OAUTHBEARER" above
    sasl_oauthbearer_jwks_file: str | None = None
    sasl_oauthbearer_jwks_url: str | None = None
    sasl_oauthbearer_jwks_refresh_ms: int = Field(3_600_000, ge=1_000)
    sasl_oauthbearer_expected_issuer: str | None = None
    sasl_oauthbearer_expected_audience: list[str] = Field(default_factory=list)
    sasl_oauthbearer_sub_claim_name: str = "sub"  # the principal is User:<claim>
    sasl_oauthbearer_scope_claim_name: str = "scope"
    sasl_oauthbearer_required_scopes: list[str] = Field(default_factory=list)
    sasl_oauthbearer_clock_skew_seconds: int = Field(30, ge=0)
    # KIP-368 connections.max.reauth.ms: SASL sessions last at most this long
    # (less when a token expires sooner); 0 = no re-authentication
    connections_max_reauth_ms: int = Field(0, ge=0)

    @field_validator("group_consumer_migration_policy", mode="before")
    @classmethod
    def _migration_policy(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not v:
            raise ValueError("must not be empty")
        return v

    @model_validator(mode="after")
    def _security(self) -> BrokerConfig:
        """Listeners, TLS files and SASL mechanisms that cannot work fail when
        the settings load, naming the key."""
        from ingest.cluster.view import inter_broker_listener
        from ingest.errors import ConfigError
        from ingest.security.listeners import parse_listeners
        from ingest.security.settings import check_security

        try:
            check_security(self)
            if self.inter_broker_listener_name is not None:
                listeners = parse_listeners(
                    self.listeners,
                    self.advertised_listeners,
                    self.listener_security_protocol_map,
                    default_host=self.host,
                    default_port=self.port,
                )
                inter_broker_listener(
                    [(x.name, x.protocol.value) for x in listeners],
                    self.inter_broker_listener_name,
                )
        except ConfigError as exc:
            detail = InitErrorDetails(
                type="value_error",
                loc=(exc.key,),
                input=getattr(self, exc.key, None),
                ctx={"error": ValueError(str(exc).split(": ", 1)[-1])},
            )
            raise ValidationError.from_exception_data("BrokerConfig", [detail]) from None
        return self

    @property
    def public_host(self) -> str:
        return self.advertised_host or self.host

    @property
    def public_port(self) -> int:
        return self.advertised_port or self.port
