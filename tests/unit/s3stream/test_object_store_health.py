"""Object store health: degraded state, rate-limited warnings, recovery,
metrics text, and the backpressure it drives."""

from __future__ import annotations

import logging

import pytest

from ingest.s3stream.api import StreamBatch
from ingest.s3stream.backpressure import UploadBackpressure
from ingest.s3stream.cache import LogCache
from ingest.s3stream.objectstore.health import ObjectStoreHealth

_MIB = 1024 * 1024


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _health(clock: _Clock) -> ObjectStoreHealth:
    return ObjectStoreHealth(
        "test store", window_s=10, recover_s=10, warn_interval_s=15, slow_s=2.0, clock=clock
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_few_answered_requests_and_one_retried_failure_stay_healthy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    h = _health(clock)
    for _ in range(100):
        h.attempt("PutObject")
        h.call("PutObject", 0.01)
    h.attempt("PutObject", "503 SlowDown")
    h.attempt("PutObject", retry=True)
    h.call("PutObject", 0.5)
    assert h.snapshot().state == "healthy"
    assert not _warnings(caplog)


def test_failures_make_the_store_degraded_with_one_warning_per_interval_then_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # on the module's own logger: another test in the same run may have raised
    # the level of a parent logger (an in-process CLI configures logging)
    caplog.set_level(logging.INFO, logger="ingest.s3stream.objectstore.health")
    clock = _Clock()
    h = _health(clock)
    for i in range(50):  # 5 s of 20 % 503s and retries
        clock.t += 0.1
        h.attempt("PutObject", "503 SlowDown" if i % 5 == 0 else None, retry=i % 5 == 1)
        h.call("PutObject", 0.3 if i % 5 == 1 else 0.01)
    snap = h.snapshot()
    assert snap.degraded and snap.state == "degraded"
    assert snap.error_rate == pytest.approx(0.2)
    assert snap.last_error == "PutObject: 503 SlowDown"
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "degraded" in warnings[0] and "PutObject 503 SlowDown" in warnings[0]
    for _ in range(120):  # 12 more seconds of failures: one more summary warning
        clock.t += 0.1
        h.attempt("PutObject", "503 SlowDown")
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings
    assert "still degraded" in warnings[1]
    clock.t += 5
    h.attempt("PutObject")
    h.call("PutObject", 0.01)
    assert h.snapshot().degraded  # not yet: failures 5 s ago
    clock.t += 6
    assert h.snapshot().state == "healthy"  # read with no requests: still evaluated
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("healthy again" in m for m in infos), infos
    assert len(_warnings(caplog)) == 2


def test_a_call_that_failed_after_its_retries_is_degraded_at_once() -> None:
    clock = _Clock()
    h = _health(clock)
    h.call("GetObject", 3.0, "SlowDown: gave up")
    snap = h.snapshot()
    assert snap.degraded and "gave up" in (snap.last_error or "")


def test_slow_calls_alone_make_the_store_degraded() -> None:
    clock = _Clock()
    h = _health(clock)
    for _ in range(3):
        clock.t += 1
        h.attempt("PutObject")
        h.call("PutObject", 2.5)
    assert h.snapshot().degraded


def test_metrics_text_has_requests_failures_retries_latency_and_the_gauge() -> None:
    clock = _Clock()
    h = _health(clock)
    h.attempt("PutObject", "503 SlowDown")
    h.attempt("PutObject", retry=True)
    h.call("PutObject", 0.2)
    h.call("GetObject", 31.0, "ReadTimeoutError: x")
    text = "\n".join(h.metrics_text())
    assert 'tidelake_object_store_requests_total{operation="PutObject",outcome="ok"} 1' in text
    assert 'tidelake_object_store_requests_total{operation="GetObject",outcome="error"} 1' in text
    assert (
        'tidelake_object_store_failed_attempts_total{operation="PutObject",failure="503 SlowDown"} 1'
        in text
    )
    assert 'tidelake_object_store_retries_total{operation="PutObject"} 1' in text
    assert 'tidelake_object_store_request_seconds_bucket{operation="PutObject",le="0.25"} 1' in text
    assert 'tidelake_object_store_request_seconds_bucket{operation="GetObject",le="30.0"} 0' in text
    assert 'tidelake_object_store_request_seconds_bucket{operation="GetObject",le="+Inf"} 1' in text
    assert 'tidelake_object_store_request_seconds_count{operation="PutObject"} 1' in text
    assert "tidelake_object_store_degraded 1" in text


def _cache_with(pending: int) -> LogCache:
    cache = LogCache(64 * _MIB)
    cache.put(StreamBatch(1, 0, 1, b"x" * pending), 0)
    return cache


class _Store:
    def __init__(self, health: ObjectStoreHealth) -> None:
        self.health = health


def test_backpressure_throttles_while_degraded_and_refuses_from_half_the_limit() -> None:
    clock = _Clock()
    health = _health(clock)
    store = _Store(health)
    small = UploadBackpressure(_cache_with(1 * _MIB), 8 * _MIB, store)
    half = UploadBackpressure(_cache_with(4 * _MIB), 8 * _MIB, store)
    full = UploadBackpressure(_cache_with(8 * _MIB), 8 * _MIB, store)
    assert small.throttle_ms() == 0 and small.refusal() is None
    assert half.throttle_ms() == 500 and half.refusal() is None  # healthy: throttled only
    assert full.refusal() is not None
    health.call("PutObject", 1.0, "SlowDown: gave up")
    assert health.degraded
    assert small.throttle_ms() == 125 and small.refusal() is None  # 1/8 of 1000 ms
    assert half.throttle_ms() == 500
    refusal = half.refusal()
    assert refusal is not None and "degraded" in refusal


def test_backpressure_without_a_health_tracker_uses_the_pending_bytes_only() -> None:
    bp = UploadBackpressure(_cache_with(1 * _MIB), 8 * _MIB, object())
    assert bp.health is None and bp.throttle_ms() == 0 and bp.refusal() is None
