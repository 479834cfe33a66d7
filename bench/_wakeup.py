"""How late this machine wakes a sleeping thread, CPU by CPU.

One process per CPU, each pinned to it, sleeps 0.5 ms in a loop for the same
seconds and counts the wake-ups that came more than 2 ms late: a thread that
is ready but not run (a hypervisor holding the virtual CPU, a kernel thread
or an interrupt handler on it). A broker's event loop that is woken late by
that much delays every request it has in flight, whatever its own code does,
so this is the floor under a paced produce p99 on the host. Run with the
machine otherwise idle.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

_SLEEP_S = 0.0005
_LATE_S = 0.002


def _probe(cpu: int, seconds: float, out: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    late: list[float] = []
    last = time.perf_counter()
    end = last + seconds
    while last < end:
        time.sleep(_SLEEP_S)
        now = time.perf_counter()
        if now - last > _LATE_S:
            late.append(now - last)
        last = now
    out.put(
        {
            "cpu": cpu,
            "late_per_s": len(late) / seconds,
            "late_max_ms": max(late, default=0.0) * 1e3,
            "late_ms_per_s": sum(late) * 1e3 / seconds,
        }
    )


def late_wakeups(seconds: float = 5.0) -> list[dict[str, float]]:
    """Per CPU this process may run on: wake-ups over 2 ms late per second,
    the latest (ms), and the time so lost per second (ms); all CPUs at once."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_probe, args=(cpu, seconds, out))
        for cpu in sorted(os.sched_getaffinity(0))
    ]
    for p in procs:
        p.start()
    rows = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    return sorted(rows, key=lambda r: r["cpu"])


if __name__ == "__main__":
    for row in late_wakeups():
        print(row)
