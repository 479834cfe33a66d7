"""Produce next to librdkafka's in-memory mock broker (issue #18's peer).

The same confluent-kafka producer settings drive, in alternating rounds of one
run, ``tidelake serve`` (fsync'd file WAL, local object store) and the mock
cluster librdkafka builds inside the producing process
(``test.mock.num.brokers=1``: C, nothing kept on disk, 4 partitions per
auto-created topic). Two measures, as in the issue: throughput of 1 KiB
messages (acks=all, lz4, idempotent) and produce latency at a fixed 20 MB/s,
each timed from after the producer's first message was delivered (its
start-up, reported on its own row: see ``broker_bench._warm_up``).
Prints medians and Tidelake/mock ratios and writes
bench/results/produce_peer.json.

``--variant KEY=VALUE`` (repeatable) adds a second ``tidelake serve`` with
those environment settings (``TIDELAKE_STORAGE_WAL_SYNC_DEPTH=1``, say) to
every round, in the rotation: a setting is judged against the default in
the same run, not across runs of a host whose speed drifts.

``--client-stats`` also records what the producer itself saw of each broker
(librdkafka's statistics in windows of 250 ms at full speed and of 1 s
when paced, see
``broker_bench.ClientStats``): the Produce round trip and how long messages
waited in the producer's queue, p50 and p99, for both measures, in the
rounds' JSON and as rows of the table. It shows where a gap to the mock
lives: in the broker's answer, or in the producer's own queue.

    python -m bench.produce_peer_bench [--rounds 3] [--messages 300000]
        [--variant KEY=VALUE ...] [--client-stats]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.broker_bench import (  # noqa: E402
    ClientStats,
    _create_topic,
    produce_latency,
    produce_throughput,
)
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_MOCK = {"test.mock.num.brokers": 1}
_PARTITIONS = 4  # the mock's default for an auto-created topic


def _load() -> float:
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--latency-rate-mb", type=float, default=20.0)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--client-stats", action="store_true")
    args = ap.parse_args()
    variant = dict(v.split("=", 1) for v in args.variant)
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc = TidelakeProcess(Path(tmp) / "data", env={"TIDELAKE_LOG_LEVEL": "WARNING"}).start()
        other = None
        if variant:
            other = TidelakeProcess(
                Path(tmp) / "variant", env={"TIDELAKE_LOG_LEVEL": "WARNING", **variant}
            ).start()
        try:
            for r in range(args.rounds):
                throughput_topic, latency_topic = f"peer-throughput-{r}", f"peer-latency-{r}"
                _create_topic(proc.bootstrap, throughput_topic, _PARTITIONS)
                _create_topic(proc.bootstrap, latency_topic, _PARTITIONS)
                row: dict[str, object] = {"round": r, "load_before": _load()}
                # alternate which goes first, so a drift in the machine's load
                # does not always favour the same side
                sides = ["tidelake", "mock"] + (["variant"] if other else [])
                order = sides[r % len(sides) :] + sides[: r % len(sides)]
                for side in order:
                    if other is not None and side == "variant":
                        _create_topic(other.bootstrap, throughput_topic, _PARTITIONS)
                        _create_topic(other.bootstrap, latency_topic, _PARTITIONS)
                    bootstrap = {
                        "tidelake": proc.bootstrap,
                        "variant": other.bootstrap if other else "",
                        "mock": "127.0.0.1:1",
                    }[side]
                    extra = _MOCK if side == "mock" else None
                    # the full-speed run lasts a second or two: shorter windows
                    seen = ClientStats(250) if args.client_stats else None
                    row[f"{side}_throughput"] = produce_throughput(
                        bootstrap, throughput_topic, args.messages, args.size, extra,
                        client_stats=seen,
                    )
                    if seen is not None:
                        row[f"{side}_throughput_client"] = seen.summary()
                        seen = ClientStats()
                    row[f"{side}_latency"] = produce_latency(
                        bootstrap,
                        latency_topic,
                        args.latency_rate_mb,
                        args.latency_seconds,
                        args.size,
                        extra,
                        client_stats=seen,
                    )
                    if seen is not None:
                        row[f"{side}_latency_client"] = seen.summary()
                row["load_after"] = _load()
                rounds.append(row)
                t, m = row["tidelake_throughput"], row["mock_throughput"]
                tl, ml = row["tidelake_latency"], row["mock_latency"]
                assert isinstance(t, dict) and isinstance(m, dict)
                assert isinstance(tl, dict) and isinstance(ml, dict)
                vt, vl = row.get("variant_throughput"), row.get("variant_latency")
                shown = (
                    f" | variant {vt['mb_per_s']:.1f} MB/s p99 {vl['p99_ms']:.2f} ms"
                    if isinstance(vt, dict) and isinstance(vl, dict)
                    else ""
                )
                print(
                    f"round {r}: tidelake {t['mb_per_s']:.1f} MB/s p99 {tl['p99_ms']:.2f} ms | "
                    f"mock {m['mb_per_s']:.1f} MB/s p99 {ml['p99_ms']:.2f} ms{shown} | "
                    f"load {row['load_before']:.1f}-{row['load_after']:.1f}",
                    flush=True,
                )
        finally:
            proc.stop()
            if other is not None:
                other.stop()

    def median(key: str, field: str) -> float:
        return statistics.median(float(r[key][field]) for r in rounds)  # type: ignore[index]

    summary = {
        "tidelake_mb_per_s": median("tidelake_throughput", "mb_per_s"),
        "mock_mb_per_s": median("mock_throughput", "mb_per_s"),
        "tidelake_p50_ms": median("tidelake_latency", "p50_ms"),
        "tidelake_p99_ms": median("tidelake_latency", "p99_ms"),
        "mock_p50_ms": median("mock_latency", "p50_ms"),
        "mock_p99_ms": median("mock_latency", "p99_ms"),
        "tidelake_first_message_ms": median("tidelake_latency", "first_message_ms"),
        "mock_first_message_ms": median("mock_latency", "first_message_ms"),
        "throughput_ratio_per_round": [
            float(r["tidelake_throughput"]["mb_per_s"]) / float(r["mock_throughput"]["mb_per_s"])  # type: ignore[index]
            for r in rounds
        ],
    }
    summary["throughput_ratio"] = summary["tidelake_mb_per_s"] / summary["mock_mb_per_s"]  # type: ignore[operator]
    client_rows: list[tuple[str, str, str]] = []
    if args.client_stats:
        for measure, label in (("throughput", "full speed"), ("latency", "20 MB/s")):
            for field, what in (
                ("rtt_p50_us", "Produce round trip p50"),
                ("rtt_p99_us", "Produce round trip p99"),
                ("queue_p99_us", "wait in producer queue p99"),
            ):
                for side in ("tidelake", "mock"):
                    values = [
                        float(c[field])
                        for r in rounds
                        if isinstance(c := r.get(f"{side}_{measure}_client"), dict) and field in c
                    ]
                    if values:
                        summary[f"{side}_{measure}_client_{field}"] = statistics.median(values)
                client_rows.append((f"{what}, {label}", f"{measure}_client_{field}", field))
    if variant:
        summary["variant"] = variant
        for key, side, field in (
            ("variant_mb_per_s", "variant_throughput", "mb_per_s"),
            ("variant_p50_ms", "variant_latency", "p50_ms"),
            ("variant_p99_ms", "variant_latency", "p99_ms"),
        ):
            summary[key] = median(side, field)
        summary["variant_throughput_ratio"] = summary["variant_mb_per_s"] / summary["mock_mb_per_s"]  # type: ignore[operator]
    result = {
        "benchmark": "produce_peer",
        "machine_cores": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": vars(args),
        "rounds": rounds,
        "medians": summary,
        "targets": {"throughput_ratio": 0.8, "tidelake_p99_ms": 3.0},
    }
    print()
    print(
        f"medians of {args.rounds} rounds    {'tidelake':>12} {'mock broker':>12}  ratio / target"
    )
    print(
        f"produce 1 KiB acks=all lz4 {summary['tidelake_mb_per_s']:>10.1f} MB/s "
        f"{summary['mock_mb_per_s']:>7.1f} MB/s  {summary['throughput_ratio']:.2f}x / >= 0.8x"
    )
    print(
        f"p50 at {args.latency_rate_mb:.0f} MB/s            {summary['tidelake_p50_ms']:>10.2f} ms "
        f"{summary['mock_p50_ms']:>9.2f} ms"
    )
    print(
        f"p99 at {args.latency_rate_mb:.0f} MB/s            {summary['tidelake_p99_ms']:>10.2f} ms "
        f"{summary['mock_p99_ms']:>9.2f} ms  / <= 3 ms"
    )
    print(
        f"first message (start-up)  {summary['tidelake_first_message_ms']:>10.2f} ms "
        f"{summary['mock_first_message_ms']:>9.2f} ms  (not in the rows above)"
    )
    for title, key, _ in client_rows:
        t_us, m_us = summary.get(f"tidelake_{key}"), summary.get(f"mock_{key}")
        if isinstance(t_us, float) and isinstance(m_us, float):
            print(f"client: {title:<40} {t_us / 1000:>8.2f} ms {m_us / 1000:>9.2f} ms")
    if variant:
        label = " ".join(f"{k}={v}" for k, v in variant.items())
        print(
            f"variant ({label}): {summary['variant_mb_per_s']:.1f} MB/s "
            f"({summary['variant_throughput_ratio']:.2f}x the mock), "
            f"p50 {summary['variant_p50_ms']:.2f} ms, p99 {summary['variant_p99_ms']:.2f} ms"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_peer.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
