"""Cluster control settings (``[cluster]``, ``TIDELAKE_CLUSTER_*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

__all__ = ["ClusterConfig"]


class ClusterConfig(BaseModel):
    model_config = {"extra": "forbid"}

    heartbeat_interval_ms: int = Field(500, ge=50)
    """How often a broker renews its membership lease."""
    session_timeout_ms: int = Field(3_000, ge=200)
    """A broker whose lease is this old is dead: the controller recovers its
    write-ahead log and moves its partitions."""
    controller_lease_ms: int = Field(3_000, ge=200)
    """How long the controller's lease lasts without renewal."""
    controller_interval_ms: int = Field(500, ge=50)
    """How often the controller looks at brokers and assignments."""
    balancer: bool = True
    """Balance the live brokers (hand-overs, no data copied): by traffic when
    there is some (the ``balancer_*`` keys), else by partition count."""
    balance_interval_ms: int = Field(5_000, ge=100)
    """How often the controller considers balancing moves."""
    max_moves_in_flight: int = Field(4, ge=1)
    """At most this many partitions handed over at once by balancing and draining."""
    load_report_interval_ms: int = Field(2_000, ge=100, le=60_000)
    """How often each broker measures its partitions' produce and fetch
    bytes/s and publishes them to the cluster store."""
    balancer_margin: float = Field(0.2, gt=0, le=10)
    """A broker whose bytes/s exceed the cluster mean by this fraction (0.2 =
    20 %) for ``balancer_window_ms`` gives its hottest partitions away."""
    balancer_window_ms: int = Field(30_000, ge=0, le=3_600_000)
    """How long a broker must stay above the margin before anything moves."""
    balancer_max_moves: int = Field(4, ge=1, le=1_000)
    """At most this many traffic balancing moves in flight."""
    balancer_cooldown_ms: int = Field(120_000, ge=0, le=86_400_000)
    """A partition the balancer moved is not moved by it again for this long."""
    balancer_min_bytes_per_s: float = Field(100_000, ge=0)
    """Under this mean load (bytes/s per broker) traffic does not decide and
    the balancer evens out partition counts instead."""
    drain_timeout_ms: int = Field(30_000, ge=0)
    """On SIGTERM, how long a broker waits for its partitions to move away."""
    allow_local_wal: bool = False
    """Let a broker with a local file WAL join a cluster. Its acknowledged
    records are then lost with its disk, so a dead broker's partitions cannot
    be recovered by the others: only for testing."""

    @model_validator(mode="after")
    def _leases(self) -> ClusterConfig:
        if self.heartbeat_interval_ms * 2 > self.session_timeout_ms:
            raise ValueError("session_timeout_ms must be at least twice heartbeat_interval_ms")
        if self.balancer_window_ms and self.balancer_window_ms < self.load_report_interval_ms:
            raise ValueError(
                "balancer_window_ms must be 0 or at least load_report_interval_ms "
                "(a window shorter than one report sees a single sample)"
            )
        return self
