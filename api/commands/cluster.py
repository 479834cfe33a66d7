"""``tidelake cluster``: see the brokers of a cluster and move partitions.

``status`` reads the HTTP admin API (``GET /api/v1/cluster``) of the brokers
given with ``--http``: the first one answers for the whole cluster (brokers,
controller, leaders, moves in flight, as every broker sees them from the
shared store), and each one reports its own produce bytes/s (brokers
register only their Kafka endpoint, so the command cannot find the others'
HTTP addresses by itself; a broker not given shows ``-``). The produce and
fetch bytes/s every broker last reported to the balancer (IN/S, OUT/S) come
from the shared store, and the recent balancing decisions from the
controller among the brokers given.

``reassign`` sends AlterPartitionReassignments over the Kafka protocol to
``--bootstrap-server`` (any broker accepts it) and, with ``--wait``, follows
Metadata and ListPartitionReassignments until the partition is led by the
target and prints how long the move took.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.commands.http_client import HttpLogin

__all__ = ["register"]

_ALTER, _LIST = 45, 46
_CLIENT_ID = b"tidelake-cli"


class _KafkaCall:
    """One request, one response (the admin APIs that confluent-kafka's
    AdminClient lacks), to the first broker of ``bootstrap`` that answers,
    over a connection secured as ``--command-config`` says."""

    def __init__(self, bootstrap: str, timeout: float, security: Any = None) -> None:
        self._bootstrap = [b.strip() for b in bootstrap.split(",") if b.strip()]
        self._timeout = timeout
        self._security = security

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        import asyncio

        from ingest.cluster.peer_client import peer_request
        from ingest.cluster.view import BrokerEndpoint
        from ingest.protocol.codec import build, request_class

        entity = build(request_class(api_key, version), values)
        last: Exception | None = None
        for address in self._bootstrap:
            host, _, port = address.rpartition(":")
            where = BrokerEndpoint(-1, host, int(port))
            try:
                return asyncio.run(
                    peer_request(
                        where,
                        api_key,
                        version,
                        entity,
                        self._timeout,
                        "tidelake-cli",
                        security=self._security,
                    )
                )
            except (OSError, TimeoutError) as exc:  # ConnectionError is an OSError
                last = exc
        raise ConnectionError(f"no broker of {','.join(self._bootstrap)} answered: {last!r}")


def _client(args: argparse.Namespace) -> dict[str, str]:
    """The librdkafka settings of ``--command-config`` and the broker."""
    from api.commands.client_config import ClientConfigError, read_client_config

    props: dict[str, str] = {}
    if args.command_config:
        try:
            props = read_client_config(args.command_config)
        except ClientConfigError as exc:
            raise SystemExit(f"tidelake: --command-config {args.command_config}: {exc}") from None
    return {**props, "bootstrap.servers": args.bootstrap_server}


def _parse_partition(text: str) -> tuple[str, int]:
    topic, sep, index = text.rpartition(":")
    if not sep or not topic or not index.isdigit():
        raise SystemExit(f"tidelake: expected TOPIC:PARTITION, got {text!r}")
    return topic, int(index)


def _leader(args: argparse.Namespace, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**_client(args), "log_level": 0, "socket.timeout.ms": 5000})
    md = admin.list_topics(topic, timeout=5)
    p = md.topics[topic].partitions.get(partition)
    return -1 if p is None else int(p.leader)


def _in_flight(kafka: _KafkaCall, topic: str, partition: int) -> bool:
    resp = kafka.request(_LIST, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    return any(
        t.name == topic and any(int(p.partition_index) == partition for p in t.partitions)
        for t in resp.topics
    )


def _reassign(args: argparse.Namespace) -> int:
    topic, partition = _parse_partition(args.partition)
    from api.commands.client_config import ClientConfigError, peer_security

    try:
        security = peer_security(_client(args))
    except ClientConfigError as exc:
        raise SystemExit(f"tidelake: --command-config {args.command_config}: {exc}") from None
    kafka = _KafkaCall(args.bootstrap_server, args.timeout, security)
    started = time.monotonic()
    try:
        resp = kafka.request(
            _ALTER,
            0,
            {
                "timeout": int(args.timeout * 1000),
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": partition, "replicas": [args.to]}],
                    }
                ],
            },
        )
    except (OSError, ConnectionError) as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 1
    if int(resp.error_code):
        print(f"tidelake: {resp.error_code.name}: {resp.error_message}", file=sys.stderr)
        return 1
    for t in resp.responses:
        for p in t.partitions:
            if int(p.error_code):
                print(f"tidelake: {p.error_code.name}: {p.error_message}", file=sys.stderr)
                return 1
    if not args.wait:
        print(f"{topic}:{partition}: move to node {args.to} requested")
        return 0
    deadline = started + args.timeout
    while True:
        try:
            done = not _in_flight(kafka, topic, partition) and (
                _leader(args, topic, partition) == args.to
            )
        except Exception as exc:  # noqa: BLE001 - a broker restarting: ask again
            print(f"tidelake: waiting: {exc}", file=sys.stderr)
            done = False
        if done:
            took = time.monotonic() - started
            print(f"{topic}:{partition}: now led by node {args.to} (moved in {took * 1000:.0f} ms)")
            return 0
        if time.monotonic() > deadline:
            print(
                f"tidelake: {topic}:{partition} not led by node {args.to} after {args.timeout:.0f} s",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.05)


def _fetch_json(url: str, sample_ms: int, timeout: float, login: HttpLogin) -> dict[str, Any]:
    """``GET /api/v1/cluster`` of one broker; a refused login or an unreachable
    broker raises ``RuntimeError`` with one line to show."""
    import httpx

    from api.commands.http_client import describe_error, login_refused

    try:
        r = httpx.get(
            f"{url.rstrip('/')}/api/v1/cluster",
            params={"sample_ms": sample_ms},
            timeout=timeout,
            **login.request_options(),
        )
    except httpx.HTTPError as exc:
        raise RuntimeError(describe_error(exc)) from None
    refused = login_refused(r, login, "the HTTP API")
    if refused is not None:
        raise RuntimeError(refused)
    r.raise_for_status()
    out: dict[str, Any] = r.json()
    return out


def _status(args: argparse.Namespace) -> int:
    from api.commands.http_client import login_from_args

    urls: list[str] = args.http or ["http://127.0.0.1:8181"]
    login = login_from_args(args)
    with ThreadPoolExecutor(len(urls)) as pool:  # the samples overlap in time
        futures = [pool.submit(_fetch_json, u, args.sample_ms, args.timeout, login) for u in urls]
        answers: list[dict[str, Any] | None] = []
        for url, fut in zip(urls, futures, strict=True):
            try:
                answers.append(fut.result())
            except Exception as exc:  # noqa: BLE001 - report and go on with the others
                print(f"tidelake: {url}: {exc}", file=sys.stderr)
                answers.append(None)
    first = next((a for a in answers if a is not None), None)
    if first is None:
        return 1
    rates = {a["node_id"]: a.get("produce_bytes_per_s") for a in answers if a is not None}
    for b in first["brokers"]:
        b["produce_bytes_per_s"] = rates.get(b["node_id"])
    reports: dict[str, Any] = (first.get("balancer") or {}).get("loads", {})
    for b in first["brokers"]:
        report = reports.get(str(b["node_id"]))
        b["bytes_in_per_s"] = None if report is None else report["bytes_in_per_s"]
        b["bytes_out_per_s"] = None if report is None else report["bytes_out_per_s"]
    decisions: dict[tuple[Any, ...], dict[str, Any]] = {}
    for a in answers:
        for d in (a or {}).get("balancer", {}).get("decisions", []):
            decisions[(d["at_ms"], d["topic"], d["partition"], d["to"])] = d
    skip = ("produce_bytes_per_s", "node_id", "balancer")
    status = {k: v for k, v in first.items() if k not in skip}
    status["balancer_decisions"] = [decisions[k] for k in sorted(decisions)][-20:]
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"cluster {status['cluster_id']}  controller: node {status['controller']}")
    print(
        f"{'NODE':>5}  {'ENDPOINT':<22} {'RACK':<10} {'STATE':<9} {'PARTITIONS':>10}  "
        f"{'BYTES/S':>12}  {'IN/S':>12}  {'OUT/S':>12}"
    )
    for b in status["brokers"]:
        state = "draining" if b["draining"] else ("live" if b["live"] else "expired")
        rate = b["produce_bytes_per_s"]
        shown = [
            "-" if r is None else f"{r:,.0f}"
            for r in (rate, b.get("bytes_in_per_s"), b.get("bytes_out_per_s"))
        ]
        endpoint = f"{b['host']}:{b['port']}"
        print(
            f"{b['node_id']:>5}  {endpoint:<22} {b['rack'] or '-':<10} {state:<9} "
            f"{b['partitions']:>10}  {shown[0]:>12}  {shown[1]:>12}  {shown[2]:>12}"
        )
    moves = status["moves_in_flight"]
    print(f"moves in flight: {len(moves)}")
    for m in moves:
        print(f"  {m['topic']}:{m['partition']}  node {m['from']} -> node {m['to']}")
    if status["balancer_decisions"]:
        print("recent balancing decisions:")
        for d in status["balancer_decisions"]:
            when = time.strftime("%H:%M:%S", time.gmtime(d["at_ms"] / 1000))
            print(f"  {when}Z  [{d['by']}] {d['reason']}")
    if args.partitions:
        print("partitions:")
        for p in status["partitions"]:
            print(
                f"  {p['topic']}:{p['partition']}  leader {p['leader']}  epoch {p['leader_epoch']}"
            )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="brokers, leaders and moves of a cluster; move a partition's leadership",
        description="See the cluster (HTTP admin API) and move partitions (Kafka protocol).",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True

    s = csub.add_parser(
        "status",
        help="brokers, controller, partitions per broker, moves in flight, bytes/s",
        description="The cluster as the brokers' HTTP API (--http) reports it. With [http] "
        'auth = "basic": --http-user, or TIDELAKE_HTTP_USER and TIDELAKE_HTTP_PASSWORD, or '
        "basic.auth.user.info of --command-config; https:// with a private CA: --ca-file.",
    )
    s.add_argument(
        "--http",
        action="append",
        metavar="URL",
        help="a broker's HTTP API (repeatable: each broker given reports its own bytes/s; "
        "default http://127.0.0.1:8181)",
    )
    s.add_argument(
        "--sample-ms", type=int, default=1000, help="bytes/s sampling window (default 1000)"
    )
    s.add_argument("--partitions", action="store_true", help="list every partition's leader")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    from api.commands.http_client import add_http_login
    from api.commands.topics import add_command_config

    add_http_login(s)
    add_command_config(s)
    s.set_defaults(func=_status)

    r = csub.add_parser(
        "reassign",
        help="move a partition's leadership to another broker (no data is copied)",
    )
    r.add_argument("partition", metavar="TOPIC:PARTITION")
    r.add_argument("--to", type=int, required=True, metavar="NODE", help="target node id")
    r.add_argument("--wait", action="store_true", help="wait until the move is done")
    r.add_argument(
        "--bootstrap-server",
        "-b",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="any broker of the cluster (default 127.0.0.1:9092)",
    )
    from api.commands.topics import add_command_config

    add_command_config(r)
    r.set_defaults(func=_reassign)
