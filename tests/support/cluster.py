"""Several real ``tidelake serve`` processes forming one cluster, for tests.

They share a throwaway PostgreSQL database (the metadata and cluster stores)
and one bucket of a moto S3 server, each with its own node id, ports and
data directory, and the object write-ahead log. Short leases make failover
quick enough for tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import boto3

from tests.support.platform import TidelakeProcess
from tests.support.postgres import temporary_database

__all__ = ["TidelakeCluster", "cluster_env", "running_cluster"]

BUCKET = "tidelake-cluster"


def cluster_env(metadata_url: str, s3_endpoint: str, node_id: int, prefix: str) -> dict[str, str]:
    return {
        "TIDELAKE_METADATA_URL": metadata_url,
        "TIDELAKE_OBJECT_STORE_URL": f"s3://{BUCKET}/{prefix}/",
        "TIDELAKE_S3_ENDPOINT_URL": s3_endpoint,
        "TIDELAKE_S3_REGION": "us-east-1",
        "TIDELAKE_S3_ACCESS_KEY_ID": "test",
        "TIDELAKE_S3_SECRET_ACCESS_KEY": "test",
        "TIDELAKE_STORAGE_WAL_KIND": "object",
        "TIDELAKE_STORAGE_WAL_BATCH_INTERVAL_MS": "5",
        "TIDELAKE_BROKER_NODE_ID": str(node_id),
        "TIDELAKE_BROKER_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
        "TIDELAKE_CLUSTER_HEARTBEAT_INTERVAL_MS": "300",
        "TIDELAKE_CLUSTER_SESSION_TIMEOUT_MS": "2000",
        "TIDELAKE_CLUSTER_CONTROLLER_LEASE_MS": "2000",
        "TIDELAKE_CLUSTER_CONTROLLER_INTERVAL_MS": "250",
        "TIDELAKE_CLUSTER_BALANCE_INTERVAL_MS": "1000",
        "TIDELAKE_CLUSTER_DRAIN_TIMEOUT_MS": "15000",
    }


class TidelakeCluster:
    def __init__(
        self, root: Path, metadata_url: str, s3_endpoint: str, env: Mapping[str, str] | None = None
    ) -> None:
        self.root = root
        self.metadata_url = metadata_url
        self.s3_endpoint = s3_endpoint
        self.env = dict(env or {})  # every node's extra settings
        self.nodes: dict[int, TidelakeProcess] = {}
        self.prefix = uuid.uuid4().hex[:12]  # one cluster's objects, apart from the others'

    def start_node(self, node_id: int, **env: str) -> TidelakeProcess:
        proc = TidelakeProcess(
            self.root / f"node-{node_id}",
            env={
                **cluster_env(self.metadata_url, self.s3_endpoint, node_id, self.prefix),
                **self.env,
                **env,
            },
        )
        proc.start()
        self.nodes[node_id] = proc
        return proc

    @property
    def bootstrap(self) -> str:
        return ",".join(
            p.bootstrap for p in self.nodes.values() if p.proc and p.proc.poll() is None
        )

    def live(self) -> list[TidelakeProcess]:
        return [p for p in self.nodes.values() if p.proc and p.proc.poll() is None]

    def stop(self) -> None:
        for p in self.nodes.values():
            p.stop()


@contextmanager
def running_cluster(
    root: Path,
    s3_endpoint: str,
    nodes: int = 3,
    env: Callable[[str], Mapping[str, str]] | None = None,
) -> Iterator[TidelakeCluster]:
    """``nodes`` brokers on a fresh database; stopped (SIGTERM) at the end.
    ``env(database url)``: settings every node adds (made before any starts)."""
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ).create_bucket(Bucket=BUCKET)
    with ExitStack() as stack:
        url = stack.enter_context(temporary_database("tl_cluster"))
        cluster = TidelakeCluster(root, url, s3_endpoint, env(url) if env is not None else None)
        stack.callback(cluster.stop)
        for node in range(1, nodes + 1):
            cluster.start_node(node)
        time.sleep(0.5)
        yield cluster
