"""Network traffic control of the engine (the tiered rate limiter)."""

from __future__ import annotations

from ingest.s3stream.network.limiter import NetworkRateLimiter, TrafficClass

__all__ = ["NetworkRateLimiter", "TrafficClass"]
