"""The fuzz tier: hypothesis-driven Kafka frames against the decoder, the
dispatcher with every handler, and a running broker.

Every test here is marked ``fuzz`` (``pytest -m "not fuzz"`` leaves the tier
out). Runs are reproducible: examples are derandomized (fixed by each test's
name), and no example database is read or written. ``TIDELAKE_FUZZ_SCALE``
multiplies every test's example count for a longer hunt (default 1).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_HERE = Path(__file__).parent
SCALE = max(1, int(os.environ.get("TIDELAKE_FUZZ_SCALE", "1")))


def fuzz_settings(max_examples: int) -> settings:
    """Settings for one fuzz test: bounded, derandomized, no database, no deadline."""
    return settings(
        max_examples=max_examples * SCALE,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)
