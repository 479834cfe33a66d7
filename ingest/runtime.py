"""Interpreter settings for a latency-sensitive broker process (and its benchmarks).

Called once, after start-up has built its long-lived objects:

- ``gc.freeze()`` moves everything alive now (botocore's service models, schema
  caches, ...) out of the collector's reach, and a larger first-generation
  threshold keeps collections rare: an unfrozen full collection of a broker heap
  was measured at 70-90 ms, a produce-latency spike of the same size;
- a 1 ms GIL switch interval lets the WAL writer thread take the GIL back
  promptly after each fsync, or a busy event loop adds up to 5 ms (the
  default interval) to every acknowledgement.
"""

from __future__ import annotations

import gc
import sys

__all__ = ["tune_for_latency"]


def tune_for_latency() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    sys.setswitchinterval(0.001)
