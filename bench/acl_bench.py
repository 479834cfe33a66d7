"""ACL benchmark: produce and fetch throughput with the authorizer on, next to off.

Two ``tidelake serve`` processes in the same run, each with one
SASL_PLAINTEXT listener (SCRAM-SHA-512 user ``bench``): one without an
authorizer, one with ``authorizer = "acl"`` holding ``--acls`` unrelated
bindings (other users, literal and prefixed topics) plus the prefixed
READ/WRITE (topics), READ (groups) and IDEMPOTENT_WRITE grants ``bench`` needs. confluent-kafka produces (1 KiB, acks=all,
lz4, idempotent) and then consumes the topic back, alternating brokers round
by round after an unmeasured warm-up. Prints a table and writes bench/results/acl.json.

    python -m bench.acl_bench [--messages 100000] [--rounds 3] [--acls 1000]
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
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.security_bench import throughput  # noqa: E402
from ingest.metadata import SqliteMetadataStore  # noqa: E402
from ingest.security.acl import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    MetadataAclStore,
    PatternType,
    ResourceType,
)
from tests.support.net import free_port  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
USER, PASSWORD, ADMIN = "bench", "bench-pw", "admin"


def _seed_acls(data: Path, filler: int) -> None:
    store = SqliteMetadataStore(data / "metadata.db")
    acls = MetadataAclStore(store)
    allow = AclPermissionType.ALLOW
    for op in (AclOperation.WRITE, AclOperation.READ):
        acls.add(
            AclBinding(
                ResourceType.TOPIC, "bench-", PatternType.PREFIXED, f"User:{USER}", "*", op, allow
            )
        )
    acls.add(
        AclBinding(
            ResourceType.GROUP,
            "g-",
            PatternType.PREFIXED,
            f"User:{USER}",
            "*",
            AclOperation.READ,
            allow,
        )
    )
    acls.add(
        AclBinding(
            ResourceType.CLUSTER,
            "kafka-cluster",
            PatternType.LITERAL,
            f"User:{USER}",
            "*",
            AclOperation.IDEMPOTENT_WRITE,
            allow,
        )
    )
    for i in range(filler):
        pattern = PatternType.PREFIXED if i % 2 else PatternType.LITERAL
        acls.add(
            AclBinding(
                ResourceType.TOPIC,
                f"team{i}-",
                pattern,
                f"User:u{i}",
                "*",
                AclOperation.READ,
                allow,
            )
        )
    store.close()


def _broker(root: Path, name: str, authorizer: bool, filler: int) -> tuple[TidelakeProcess, str]:
    data = root / name
    data.mkdir()
    for user in (USER, ADMIN):
        subprocess.run(
            [sys.executable, "-m", "api.cli", "users", "create", user, "--password", PASSWORD,
             "--data-dir", str(data)],
            check=True, cwd=REPO, capture_output=True,
        )  # fmt: skip
    if authorizer:
        _seed_acls(data, filler)
    proc = TidelakeProcess(data, env={"TIDELAKE_LOG_LEVEL": "WARNING"})
    sasl = free_port()
    config = root / f"{name}.toml"
    extra = f'authorizer = "acl"\nsuper_users = ["User:{ADMIN}"]\n' if authorizer else ""
    config.write_text(
        f'[broker]\nlisteners = ["PLAINTEXT://127.0.0.1:{proc.kafka_port}", '
        f'"SASL_PLAINTEXT://127.0.0.1:{sasl}"]\n{extra}'
    )
    proc.config_file = config
    proc.start()
    return proc, f"127.0.0.1:{sasl}"


def _conf(bootstrap: str, user: str = USER) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": PASSWORD,
        "log_level": 0,
    }


def fetch(conf: dict[str, Any], topic: str, partitions: int, n: int, size: int) -> dict[str, float]:
    consumer = Consumer(
        {**conf, "group.id": f"g-{topic}", "enable.auto.commit": False, "fetch.min.bytes": 1}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 120
    while got < n and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"mb_per_s": got * size / elapsed / 1e6, "seconds": elapsed, "messages": got}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=1000, help="unrelated bindings on the ACL broker")
    args = ap.parse_args()
    names = ("authorizer off", "authorizer acl")
    results: dict[str, Any] = {n: {"produce": [], "fetch": []} for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        brokers = {
            names[0]: _broker(root, "off", False, args.acls),
            names[1]: _broker(root, "acl", True, args.acls),
        }
        try:
            for _proc, bootstrap in brokers.values():
                admin = AdminClient(_conf(bootstrap, ADMIN))
                topics = ["bench-warm", *(f"bench-{r}" for r in range(args.rounds))]
                made = admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics])
                for future in made.values():
                    future.result(30)
            for _proc, bootstrap in brokers.values():  # warm both up, unmeasured
                throughput(_conf(bootstrap), "bench-warm", args.messages // 5, args.size)
            for r in range(args.rounds):  # alternate, so drift hits both alike
                for name, (_proc, bootstrap) in brokers.items():
                    conf = _conf(bootstrap)
                    topic = f"bench-{r}"
                    produced = throughput(conf, topic, args.messages, args.size)
                    results[name]["produce"].append(produced)
                    results[name]["fetch"].append(
                        fetch(conf, topic, args.partitions, args.messages, args.size)
                    )
        finally:
            for proc, _ in brokers.values():
                proc.stop()
    print(f"{'broker':<16} {'produce MB/s (median)':>22} {'fetch MB/s (median)':>20} {'errors':>7}")
    medians: dict[str, tuple[float, float]] = {}
    for name in names:
        prod = statistics.median(x["mb_per_s"] for x in results[name]["produce"])
        fet = statistics.median(x["mb_per_s"] for x in results[name]["fetch"])
        errors = sum(int(x["errors"]) for x in results[name]["produce"])
        medians[name] = (prod, fet)
        print(f"{name:<16} {prod:>22.1f} {fet:>20.1f} {errors:>7}")
    produce_ratio = medians[names[1]][0] / medians[names[0]][0]
    fetch_ratio = medians[names[1]][1] / medians[names[0]][1]
    print(
        f"acl / off: produce {produce_ratio:.2f}, fetch {fetch_ratio:.2f} ({args.acls} other ACLs)"
    )
    RESULTS.mkdir(exist_ok=True)
    out = {
        "args": vars(args),
        "load_avg": os.getloadavg(),
        "produce_ratio": produce_ratio,
        "fetch_ratio": fetch_ratio,
        "results": results,
    }
    (RESULTS / "acl.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
