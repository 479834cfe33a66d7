"""``[cluster]`` balancer settings: defaults, environment, refused values."""

from __future__ import annotations

import pytest

from api.settings import load_section
from ingest.cluster.config import ClusterConfig
from ingest.errors import ConfigError


def test_defaults_balance_by_traffic() -> None:
    c = ClusterConfig()
    assert c.balancer is True
    assert (c.balancer_margin, c.balancer_window_ms, c.balancer_max_moves) == (0.2, 30_000, 4)
    assert c.balancer_cooldown_ms == 120_000 and c.load_report_interval_ms == 2_000


def test_keys_come_from_the_file_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_CLUSTER_BALANCER_WINDOW_MS", "4000")
    monkeypatch.setenv("TIDELAKE_CLUSTER_BALANCER_MARGIN", "0.5")
    c = load_section(ClusterConfig, "cluster", {"balancer_max_moves": 2, "balancer_window_ms": 1})
    assert (c.balancer_window_ms, c.balancer_margin, c.balancer_max_moves) == (4000, 0.5, 2)


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("balancer_margin", 0, "cluster.balancer_margin"),
        ("balancer_max_moves", 0, "cluster.balancer_max_moves"),
        ("balancer_cooldown_ms", -1, "cluster.balancer_cooldown_ms"),
        ("load_report_interval_ms", 10, "cluster.load_report_interval_ms"),
        ("balancer_min_bytes_per_s", -5, "cluster.balancer_min_bytes_per_s"),
    ],
)
def test_bad_values_are_refused_by_name(key: str, value: object, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_section(ClusterConfig, "cluster", {key: value})
    assert named in str(err.value)


def test_a_window_shorter_than_one_report_is_refused() -> None:
    with pytest.raises(ConfigError, match="balancer_window_ms must be 0 or at least"):
        load_section(
            ClusterConfig, "cluster", {"balancer_window_ms": 500, "load_report_interval_ms": 1000}
        )
    ok = load_section(ClusterConfig, "cluster", {"balancer_window_ms": 0})
    assert ok.balancer_window_ms == 0
