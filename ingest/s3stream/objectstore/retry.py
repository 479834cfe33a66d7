"""How the object WAL retries and hedges its puts.

A WAL put sits on the produce path (acknowledgements wait for it, in
position order), so it must not wait in the store client's own backoff:
botocore's standard mode sleeps ``rand x 1, 2, 4, 8 s`` after a ``503
SlowDown``, and with one put in twenty failing, acknowledgements stalled for
seconds. WAL puts instead go through a store that makes one attempt per call
(:func:`single_attempt`) and retry on :class:`WalPutPolicy`'s short, capped
schedule; while the store keeps failing (longer than ``fast_for_s``) the
retries back off exponentially, so a store that is down or throttling is not
hammered. A put that has not answered after ``hedge_after_s`` gets a second,
identical put (same key, same body, create-only), and the first answer wins.

Every other request of the store (uploads, reads, deletes) keeps the store's
own retries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["PutSchedule", "WalPutPolicy", "single_attempt"]


@runtime_checkable
class _SingleAttemptCapable(Protocol):
    def without_retries(self) -> ObjectStore: ...


def single_attempt(store: ObjectStore) -> ObjectStore:
    """The same store making one attempt per request, if it retries on its
    own (``without_retries()``); else ``store`` itself."""
    if isinstance(store, _SingleAttemptCapable):
        return store.without_retries()
    return store


@dataclass(frozen=True, slots=True)
class WalPutPolicy:
    """The retry schedule of one WAL object put.

    Retry ``n`` (1-based) of a put first tried ``elapsed`` seconds ago waits:

    - nothing for the first ``immediate_retries``;
    - then ``d * uniform(1, 2)`` capped at ``cap_s``, with ``d = delay_s``
      doubling per retry (50-100 ms, 100-200 ms, then 125-250 ms by default),
      while ``elapsed < fast_for_s``;
    - after that, ``slow_initial_s`` doubling per retry up to ``slow_max_s``,
      times ``uniform(0.5, 1.5)``: a store that stays down is retried
      without a storm, and the put still lands once it is back (nothing is
      dropped; acknowledgements wait).

    ``hedge_after_s``: a second identical put once an attempt has not answered
    this long (``None``: never). ``store_retries``: leave the store's own
    retries on (the policy before hedging and the fast schedule; kept for
    comparison in ``bench/s3_faults_bench.py``).
    """

    immediate_retries: int = 1
    delay_s: float = 0.05
    cap_s: float = 0.25
    fast_for_s: float = 3.0
    slow_initial_s: float = 0.25
    slow_max_s: float = 5.0
    hedge_after_s: float | None = 0.15
    store_retries: bool = False

    @classmethod
    def store_backoff(cls, initial_s: float = 0.1, max_s: float = 5.0) -> WalPutPolicy:
        """The earlier policy: the store's retries (botocore's backoff), then
        ``initial_s`` doubling up to ``max_s``; no hedging."""
        return cls(
            immediate_retries=0,
            fast_for_s=0.0,
            slow_initial_s=initial_s,
            slow_max_s=max_s,
            hedge_after_s=None,
            store_retries=True,
        )

    def schedule(self, rng: random.Random | None = None) -> PutSchedule:
        """The retry delays of one put (first tried now)."""
        return PutSchedule(self, rng)


class PutSchedule:
    """The waits between the attempts of one put, per :class:`WalPutPolicy`."""

    def __init__(self, policy: WalPutPolicy, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._rng = rng or random.Random()
        self._fast = 0  # retries so far in the fast phase
        self._slow = 0  # ... in the slow phase

    def next_delay(self, elapsed: float) -> float:
        """Seconds to wait before the next retry of a put first tried
        ``elapsed`` seconds ago."""
        p = self._policy
        if elapsed < p.fast_for_s:
            self._fast += 1
            if self._fast <= p.immediate_retries:
                return 0.0
            k = min(self._fast - p.immediate_retries - 1, 16)
            return min(p.delay_s * (1 << k) * self._rng.uniform(1.0, 2.0), p.cap_s)
        k = min(self._slow, 16)
        self._slow += 1
        return min(p.slow_initial_s * (1 << k), p.slow_max_s) * self._rng.uniform(0.5, 1.5)
