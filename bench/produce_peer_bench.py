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

``--baseline REF`` adds ``tidelake serve`` run from a git ref (checked out
into a temporary worktree, its C modules built there, as
``produce_ab_bench`` does) to every round the same way: a change to the
produce path is judged by what the producer sees, against the code before
it, in one run.

``--client-stats`` also records what the producer itself saw of each broker
(librdkafka's statistics in windows of 250 ms at full speed and of 1 s
when paced, see
``broker_bench.ClientStats``): the Produce round trip and how long messages
waited in the producer's queue, p50 and p99, for both measures, in the
rounds' JSON and as rows of the table. It shows where a gap to the mock
lives: in the broker's answer, or in the producer's own queue.

    python -m bench.produce_peer_bench [--rounds 3] [--messages 300000]
        [--variant KEY=VALUE ...] [--baseline REF] [--client-stats]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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
from bench.produce_ab_bench import _worktree  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_MOCK: dict[str, object] = {"test.mock.num.brokers": 1}
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
    ap.add_argument("--baseline", metavar="REF", help="a git ref: its broker, in every round")
    ap.add_argument("--client-stats", action="store_true")
    args = ap.parse_args()
    variant = dict(v.split("=", 1) for v in args.variant)
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        quiet = {"TIDELAKE_LOG_LEVEL": "WARNING"}
        tree = _worktree(args.baseline, Path(tmp) / "tree") if args.baseline else None
        proc = TidelakeProcess(Path(tmp) / "data", env=quiet).start()
        others: dict[str, TidelakeProcess] = {}
        try:
            if variant:
                others["variant"] = TidelakeProcess(
                    Path(tmp) / "variant", env={**quiet, **variant}
                ).start()
            if tree is not None:
                others["baseline"] = TidelakeProcess(
                    Path(tmp) / "baseline", env=quiet, tree=tree
                ).start()
            _rounds(args, proc, others, rounds)
        finally:
            proc.stop()
            for other in others.values():
                other.stop()
            if tree is not None:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], check=False)
    _report(args, variant, rounds)
    return 0


def _rounds(
    args: argparse.Namespace,
    proc: TidelakeProcess,
    others: dict[str, TidelakeProcess],
    rounds: list[dict[str, object]],
) -> None:
    for r in range(args.rounds):
        throughput_topic, latency_topic = f"peer-throughput-{r}", f"peer-latency-{r}"
        for broker in (proc, *others.values()):
            _create_topic(broker.bootstrap, throughput_topic, _PARTITIONS)
            _create_topic(broker.bootstrap, latency_topic, _PARTITIONS)
        row: dict[str, object] = {"round": r, "load_before": _load()}
        # alternate which goes first, so a drift in the machine's load
        # does not always favour the same side
        sides = ["tidelake", "mock", *others]
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            bootstrap = (
                "127.0.0.1:1"
                if side == "mock"
                else proc.bootstrap
                if side == "tidelake"
                else others[side].bootstrap
            )
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
        shown = ""
        for side in sides:
            t, lat = row[f"{side}_throughput"], row[f"{side}_latency"]
            assert isinstance(t, dict) and isinstance(lat, dict)
            shown += f"{side} {t['mb_per_s']:.1f} MB/s p99 {lat['p99_ms']:.2f} ms | "
        print(
            f"round {r}: {shown}load {row['load_before']:.1f}-{row['load_after']:.1f}",
            flush=True,
        )


def _report(
    args: argparse.Namespace, variant: dict[str, str], rounds: list[dict[str, object]]
) -> None:
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
    extra_sides = [s for s in ("variant", "baseline") if f"{s}_throughput" in rounds[0]]
    client_rows: list[tuple[str, str, str]] = []
    if args.client_stats:
        for measure, label in (("throughput", "full speed"), ("latency", "20 MB/s")):
            for field, what in (
                ("rtt_p50_us", "Produce round trip p50"),
                ("rtt_p99_us", "Produce round trip p99"),
                ("queue_p99_us", "wait in producer queue p99"),
            ):
                for side in ("tidelake", "mock", *extra_sides):
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
    if args.baseline:
        summary["baseline"] = args.baseline
    for side in extra_sides:
        for key, measure, field in (
            (f"{side}_mb_per_s", f"{side}_throughput", "mb_per_s"),
            (f"{side}_p50_ms", f"{side}_latency", "p50_ms"),
            (f"{side}_p99_ms", f"{side}_latency", "p99_ms"),
        ):
            summary[key] = median(measure, field)
        summary[f"{side}_throughput_ratio"] = (
            summary[f"{side}_mb_per_s"] / summary["mock_mb_per_s"]  # type: ignore[operator]
        )
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
            more = "".join(
                f" {side} {v / 1000:.2f} ms"
                for side in extra_sides
                if isinstance(v := summary.get(f"{side}_{key}"), float)
            )
            print(f"client: {title:<40} {t_us / 1000:>8.2f} ms {m_us / 1000:>9.2f} ms{more}")
    for side in extra_sides:
        label = (
            " ".join(f"{k}={v}" for k, v in variant.items())
            if side == "variant"
            else f"{args.baseline}'s code"
        )
        print(
            f"{side} ({label}): {summary[f'{side}_mb_per_s']:.1f} MB/s "
            f"({summary[f'{side}_throughput_ratio']:.2f}x the mock), "
            f"p50 {summary[f'{side}_p50_ms']:.2f} ms, p99 {summary[f'{side}_p99_ms']:.2f} ms"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_peer.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
