"""Byte-rate quotas applied: which quota a request falls under, its rate, its throttle.

As Kafka's ClientQuotaManager: for a (user, client id) the quota of each
kind comes from the most specific entity that sets it, in this order:
user + client id, user + default client, user, default user + client id,
default user + default client, default user, client id, default client.
Every request counted against one quota entity shares its rate (all
clients of a user with a user quota share it).

The rate is the bytes of the last ``samples`` windows of ``window_s``
divided by the time they span. Past the quota, the throttle is
``(rate - quota) / quota * span`` (at most 30 s), the time the client
must wait for its rate to fall back to the quota: requests counted one
after the other are admitted at the quota's pace after a first burst of
one span's worth.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from ingest.security.quota import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QuotaEntity,
    QuotaStore,
)

__all__ = ["QuotaManager", "CONSUMER_BYTE_RATE", "PRODUCER_BYTE_RATE"]

log = logging.getLogger(__name__)
# a request waits at most this long (clients time requests out after 30 s)
_MAX_THROTTLE_S = 30.0


def _candidates(user: str, client_id: str) -> list[QuotaEntity]:
    return [
        QuotaEntity(user, client_id),
        QuotaEntity(user, None),
        QuotaEntity(user),
        QuotaEntity(None, client_id),
        QuotaEntity(None, None),
        QuotaEntity(None),
        QuotaEntity(client_id=client_id),
        QuotaEntity(client_id=None),
    ]


class _Rate:
    """Bytes in fixed windows; the rate over the windows kept."""

    def __init__(self, window_s: float, samples: int) -> None:
        self.window_s = window_s
        self.samples: deque[list[float]] = deque(maxlen=samples)  # [window start, bytes]

    def add(self, nbytes: int, now: float) -> tuple[float, float]:
        """Count ``nbytes``; returns (rate in bytes/s, span in s)."""
        if not self.samples or now - self.samples[-1][0] >= self.window_s:
            self.samples.append([now, 0.0])
        self.samples[-1][1] += nbytes
        # at least (samples - 1) windows, as Kafka, so a first burst is not a huge rate
        full = ((self.samples.maxlen or 1) - 1) * self.window_s
        span = max(now - self.samples[0][0], full, self.window_s)
        total = sum(s[1] for s in self.samples)
        return total / span, span


class QuotaManager:
    def __init__(
        self,
        store: QuotaStore,
        *,
        window_s: float = 1.0,
        samples: int = 11,
        refresh_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.window_s = window_s
        self.samples = samples
        self.refresh_interval_s = refresh_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._version: str | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._rates: dict[tuple[str, QuotaEntity], _Rate] = {}

    def refresh(self) -> bool:
        version = self.store.version()
        if version == self._version:
            return False
        quotas = self.store.entries()
        with self._lock:
            self._quotas = quotas
            self._rates = {k: r for k, r in self._rates.items() if k[1] in quotas}
            self._version = version
        return True

    async def run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.refresh)
            except Exception:  # a store outage keeps the last quotas
                log.warning("cannot refresh quotas; keeping the cached ones", exc_info=True)
            await asyncio.sleep(self.refresh_interval_s)

    @property
    def active(self) -> bool:
        """Whether any quota is set (else nothing needs counting)."""
        return bool(self._quotas)

    def quota_for(self, kind: str, user: str, client_id: str) -> tuple[QuotaEntity, float] | None:
        """The entity whose ``kind`` quota applies, and the quota (bytes/s)."""
        quotas = self._quotas
        if not quotas:
            return None
        for entity in _candidates(user, client_id):
            value = quotas.get(entity, {}).get(kind)
            if value is not None:
                return entity, value
        return None

    def record(self, kind: str, user: str, client_id: str, nbytes: int) -> float:
        """Count ``nbytes`` of ``kind``; the throttle in seconds (0 within quota)."""
        found = self.quota_for(kind, user, client_id)
        if found is None:
            return 0.0
        entity, quota = found
        with self._lock:
            rate = self._rates.get((kind, entity))
            if rate is None:
                rate = self._rates[(kind, entity)] = _Rate(self.window_s, self.samples)
            observed, span = rate.add(nbytes, self._clock())
        if observed <= quota:
            return 0.0
        return min((observed - quota) / quota * span, _MAX_THROTTLE_S)
