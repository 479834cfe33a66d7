"""Markers in a cluster: partitions led here get theirs from this broker's
logs; the others from their leaders, through one WriteTxnMarkers request per
broker (what Kafka's transaction coordinator sends to partition leaders).

The request goes to the other broker's inter-broker listener (Kafka's
``inter.broker.listener.name``: the listener of that name each broker
registered in the cluster), over TLS and SASL when that listener needs them
(:class:`~ingest.cluster.peer_connection.PeerSecurity`, built by the broker
from its ``inter_broker_*`` settings). A broker that cannot be reached, has
no such listener or refuses this broker's credentials (logged as a warning),
or a partition whose leader is changing, answers NOT_LEADER_OR_FOLLOWER: the
coordinator retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import i16, i32

from ingest.cluster.peer_client import peer_request
from ingest.cluster.peer_connection import PeerAuthenticationError, PeerSecurity
from ingest.cluster.view import ClusterView
from ingest.log.manager import LogManager
from ingest.protocol.errors import ErrorCode
from ingest.txn.adapters import LogMarkerWriter

__all__ = ["ClusterMarkerWriter"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]
_WRITE_TXN_MARKERS = 27
_VERSION = 1


class ClusterMarkerWriter:
    def __init__(
        self,
        logs: LogManager,
        view: Callable[[], ClusterView],
        timeout_s: float = 10.0,
        listener: str | None = None,
        security: PeerSecurity | None = None,
    ) -> None:
        self._logs = logs
        self._local = LogMarkerWriter(logs)
        self._view = view
        self._timeout_s = timeout_s
        self._listener = listener  # the inter-broker listener's name
        self._security = security  # how that listener is spoken to (None: PLAINTEXT)

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[Partition],
    ) -> dict[Partition, ErrorCode]:
        view = self._view()
        here = [tp for tp in partitions if self._logs.partition(*tp) is not None]
        out: dict[Partition, ErrorCode] = {}
        by_node: dict[int, list[Partition]] = {}
        for tp in partitions:
            if tp in here:
                continue
            if not self._logs.has_partition(*tp):
                out[tp] = ErrorCode.unknown_topic_or_partition
                continue
            leader, _epoch = view.leader(*tp)
            if leader < 0 or leader == view.node_id:
                out[tp] = ErrorCode.not_leader_or_follower  # moving: try again
            else:
                by_node.setdefault(leader, []).append(tp)
        endpoints = {b.node_id: b for b in view.brokers()}

        async def remote(node: int, tps: list[Partition]) -> dict[Partition, ErrorCode]:
            known = endpoints.get(node)
            endpoint = known.on(self._listener) if known is not None else None
            if endpoint is None:
                if known is not None:
                    log.warning(
                        "broker %d has no listener %s: its transaction markers wait",
                        node,
                        self._listener,
                    )
                return {tp: ErrorCode.not_leader_or_follower for tp in tps}
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            request = WriteTxnMarkersRequest(
                markers=(
                    WritableTxnMarker(
                        producer_id=ProducerId(producer_id),
                        producer_epoch=i16(producer_epoch),
                        transaction_result=commit,
                        topics=tuple(
                            WritableTxnMarkerTopic(
                                name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps)
                            )
                            for t, ps in by_topic.items()
                        ),
                        coordinator_epoch=i32(coordinator_epoch),
                    ),
                )
            )
            try:
                response = await peer_request(
                    endpoint,
                    _WRITE_TXN_MARKERS,
                    _VERSION,
                    request,
                    self._timeout_s,
                    "tidelake-txn-coordinator",
                    security=self._security,
                )
            except PeerAuthenticationError as exc:  # retried; an operator must fix it
                log.warning("markers to broker %d refused: %s", node, exc)
                return {tp: ErrorCode.not_leader_or_follower for tp in tps}
            except Exception as exc:  # noqa: BLE001 - unreachable now: retried
                log.info("markers to broker %d failed: %s", node, exc)
                return {tp: ErrorCode.not_leader_or_follower for tp in tps}
            assert isinstance(response, WriteTxnMarkersResponse)
            codes: dict[Partition, ErrorCode] = {
                (str(t.name), int(p.partition_index)): ErrorCode(p.error_code)
                for m in response.markers
                for t in m.topics
                for p in t.partitions
            }
            return {tp: codes.get(tp, ErrorCode.not_leader_or_follower) for tp in tps}

        jobs = [remote(node, tps) for node, tps in by_node.items()]
        if here:
            jobs.append(
                self._local.write_markers(
                    producer_id, producer_epoch, commit, coordinator_epoch, here
                )
            )
        for result in await asyncio.gather(*jobs):
            out.update(result)
        return out
