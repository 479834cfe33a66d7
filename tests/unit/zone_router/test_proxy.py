"""The proxy and leader halves of a routed produce, with the in-memory
object store, a fake cluster view and a fake partition log on the leader
(the real Produce path is exercised by the cluster integration test)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.produce.v9 import request as v9
from kio.schema.produce.v11.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.s3stream.objectstore.memory import MemoryObjectStore
from ingest.zone_router import (
    ZoneRouter,
    close_router,
    is_routed,
    objects,
    routed_produce,
    router_of,
    serve,
    wire,
)

BROKERS = [
    BrokerEndpoint(1, "127.0.0.1", 9001, "a"),
    BrokerEndpoint(2, "127.0.0.1", 9002, "a"),
    BrokerEndpoint(3, "127.0.0.1", 9003, "b"),
]
# t-0 is led by 1 (the proxy), t-1 and t-2 by 3 (the other rack), t-3 by 2
LEADERS = {("t", 0): 1, ("t", 1): 3, ("t", 2): 3, ("t", 3): 2}


class FakeCluster:
    clustered = True

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.members = list(BROKERS)

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return self.members

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return LEADERS.get((topic, partition), -1), 0


class FakeLogs:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id

    def partition(self, name: str, index: int) -> object | None:
        return object() if LEADERS.get((name, index)) == self.node_id else None

    def partition_error(self, name: str, index: int) -> ErrorCode:
        if (name, index) in LEADERS:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition


class FakeEngine:
    def __init__(self, store: MemoryObjectStore) -> None:
        self.object_store = store


class FakeBroker:
    def __init__(self, node_id: int, store: MemoryObjectStore) -> None:
        self.cluster = FakeCluster(node_id)
        self.logs = FakeLogs(node_id)
        self.engine = FakeEngine(store)
        self.zone_router: ZoneRouter | None = None


def _response(parts: list[tuple[str, int, ErrorCode, int]], throttle: int = 0) -> ProduceResponse:
    topics: dict[str, list[PartitionProduceResponse]] = {}
    for topic, index, code, offset in parts:
        topics.setdefault(topic, []).append(
            PartitionProduceResponse(
                index=i32(index),
                error_code=code,
                base_offset=i64(offset),
                log_append_time=None,
                log_start_offset=i64(0),
                record_errors=(),
                error_message=None,
            )
        )
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(name=TopicName(t), partition_responses=tuple(ps))
            for t, ps in topics.items()
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle)),
    )


class FakeLeader:
    """Broker 3's partition logs: appended batches per partition, one offset each."""

    def __init__(self, store: MemoryObjectStore) -> None:
        self.broker = FakeBroker(3, store)
        self.appended: dict[tuple[str, int], list[bytes]] = {}
        self.contexts: list[RequestContext] = []
        self.errors: dict[tuple[str, int], ErrorCode] = {}
        self.delay_s = 0.0
        self.in_flight = 0
        self.max_in_flight = 0

    async def append(self, ctx: RequestContext, request: Any) -> ProduceResponse:
        self.contexts.append(ctx)
        out = []
        for t in request.topic_data:
            for p in t.partition_data:
                key = (str(t.name), int(p.index))
                if key in self.errors:
                    out.append((key[0], key[1], self.errors[key], -1))
                    continue
                log = self.appended.setdefault(key, [])
                out.append((key[0], key[1], ErrorCode.none, len(log)))
                log.append(bytes(p.records))
        return _response(out, throttle=7)

    async def send(
        self, endpoint: BrokerEndpoint, request: EnvelopeRequest, timeout_s: float
    ) -> EnvelopeResponse:
        assert endpoint.node_id == 3
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            ctx = RequestContext(self.broker, 58, 0, 1, "tidelake-zone-router", "127.0.0.1")  # type: ignore[arg-type]
            return await serve(ctx, request, self.append)
        finally:
            self.in_flight -= 1


def _request(parts: dict[int, bytes | None], acks: int = -1) -> v9.ProduceRequest:
    return v9.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(
            v9.TopicProduceData(
                name=TopicName("t"),
                partition_data=tuple(
                    v9.PartitionProduceData(index=i32(i), records=None if r is None else Records(r))
                    for i, r in parts.items()
                ),
            ),
        ),
    )


class Direct:
    """The proxy's own Produce path for the partitions it leads."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def __call__(self, ctx: RequestContext, request: Any) -> ProduceResponse | None:
        assert ctx.produce_order is None  # the router holds the connection's lock
        self.requests.append(request)
        if int(request.acks) == 0:
            return None
        return _response(
            [
                (str(t.name), int(p.index), ErrorCode.none, 100)
                for t in request.topic_data
                for p in t.partition_data
            ]
        )


@pytest.fixture
def store() -> MemoryObjectStore:
    return MemoryObjectStore()


@pytest.fixture
def leader(store: MemoryObjectStore) -> FakeLeader:
    return FakeLeader(store)


@pytest.fixture
def proxy(store: MemoryObjectStore, leader: FakeLeader) -> FakeBroker:
    broker = FakeBroker(1, store)
    broker.zone_router = ZoneRouter(1, store, send=leader.send)
    return broker


def _ctx(
    broker: FakeBroker,
    client_id: str | None = "app;tidelake_rack=a",
    lock: asyncio.Lock | None = None,
) -> RequestContext:
    return RequestContext(broker, 0, 9, 1, client_id, "10.0.0.5", None, lock or asyncio.Lock())  # type: ignore[arg-type]


def _results(response: ProduceResponse | None) -> dict[tuple[str, int], PartitionProduceResponse]:
    assert response is not None
    return {
        (str(t.name), int(p.index)): p for t in response.responses for p in t.partition_responses
    }


async def test_batches_for_a_leader_in_another_rack_reach_it_through_object_storage(
    proxy: FakeBroker, leader: FakeLeader, store: MemoryObjectStore
) -> None:
    routing = routed_produce(_ctx(proxy), _request({0: b"local", 1: b"one", 2: b"two"}))
    assert routing is not None
    direct = Direct()
    response = await routing.run(direct)
    got = _results(response)
    assert [k for k in got] == [("t", 0), ("t", 1), ("t", 2)]  # request order
    assert all(p.error_code == ErrorCode.none for p in got.values())
    assert got[("t", 0)].base_offset == 100  # the direct path
    assert (got[("t", 1)].base_offset, got[("t", 2)].base_offset) == (0, 0)
    assert leader.appended == {("t", 1): [b"one"], ("t", 2): [b"two"]}
    assert [int(p.index) for t in direct.requests[0].topic_data for p in t.partition_data] == [0]
    # the leader appended for the client, marked routed, in one request
    (ctx,) = leader.contexts
    assert (
        is_routed(ctx) and ctx.client_id == "app;tidelake_rack=a" and ctx.client_host == "10.0.0.5"
    )
    assert response is not None and response.throttle_time.total_seconds() * 1000 == 7
    assert proxy.zone_router is not None
    await proxy.zone_router.settled()
    assert await store.list(objects.PREFIX) == []  # deleted once the leader answered


async def test_clients_without_a_rack_or_of_another_rack_are_never_routed(
    proxy: FakeBroker,
) -> None:
    request = _request({1: b"x"})
    assert routed_produce(_ctx(proxy, "app"), request) is None
    assert routed_produce(_ctx(proxy, None), request) is None
    assert routed_produce(_ctx(proxy, "tidelake_rack=b"), request) is None
    assert routed_produce(_ctx(proxy), _request({0: b"mine", 9: b"unknown"})) is None


async def test_a_partition_led_in_the_same_rack_is_routed_too(
    proxy: FakeBroker, leader: FakeLeader
) -> None:
    routing = routed_produce(_ctx(proxy), _request({3: b"x"}))
    assert routing is not None and list(routing.routed) == [2]


async def test_an_unreachable_leader_gives_not_leader_or_follower(
    proxy: FakeBroker, store: MemoryObjectStore
) -> None:
    async def refuse(
        endpoint: BrokerEndpoint, request: EnvelopeRequest, timeout_s: float
    ) -> EnvelopeResponse:
        raise ConnectionRefusedError("refused")

    assert proxy.zone_router is not None
    proxy.zone_router.send = refuse
    routing = routed_produce(_ctx(proxy), _request({1: b"x", 2: b"y"}))
    assert routing is not None
    got = _results(await routing.run(Direct()))
    assert {p.error_code for p in got.values()} == {ErrorCode.not_leader_or_follower}
    await proxy.zone_router.settled()
    assert await store.list(objects.PREFIX) == []


async def test_a_leader_that_does_not_answer_in_time_gives_request_timed_out(
    proxy: FakeBroker,
) -> None:
    async def silent(
        endpoint: BrokerEndpoint, request: EnvelopeRequest, timeout_s: float
    ) -> EnvelopeResponse:
        raise TimeoutError

    assert proxy.zone_router is not None
    proxy.zone_router.send = silent
    routing = routed_produce(_ctx(proxy), _request({1: b"x"}))
    assert routing is not None
    got = _results(await routing.run(Direct()))
    assert got[("t", 1)].error_code == ErrorCode.request_timed_out


async def test_the_leaders_errors_pass_through_per_partition(
    proxy: FakeBroker, leader: FakeLeader
) -> None:
    leader.errors[("t", 2)] = ErrorCode.out_of_order_sequence_number
    routing = routed_produce(_ctx(proxy), _request({1: b"x", 2: b"y"}))
    assert routing is not None
    got = _results(await routing.run(Direct()))
    assert got[("t", 1)].error_code == ErrorCode.none
    assert got[("t", 2)].error_code == ErrorCode.out_of_order_sequence_number


async def test_acks_0_raises_a_routed_failure_so_the_connection_closes(
    proxy: FakeBroker, leader: FakeLeader
) -> None:
    leader.errors[("t", 1)] = ErrorCode.invalid_record
    routing = routed_produce(_ctx(proxy), _request({0: b"l", 1: b"x"}, acks=0))
    assert routing is not None
    with pytest.raises(Exception, match="t-1"):
        await routing.run(Direct())
    routing = routed_produce(_ctx(proxy), _request({2: b"x"}, acks=0))
    assert routing is not None
    assert await routing.run(Direct()) is None
    assert leader.appended[("t", 2)] == [b"x"]


async def test_one_connection_has_one_routed_request_in_flight_in_order(
    proxy: FakeBroker, leader: FakeLeader
) -> None:
    leader.delay_s = 0.02
    lock = asyncio.Lock()
    runs = []
    for i in range(5):
        routing = routed_produce(_ctx(proxy, lock=lock), _request({1: b"%d" % i}))
        assert routing is not None
        runs.append(asyncio.ensure_future(routing.run(Direct())))
    offsets = [_results(r)[("t", 1)].base_offset for r in await asyncio.gather(*runs)]
    assert leader.max_in_flight == 1
    assert leader.appended[("t", 1)] == [b"0", b"1", b"2", b"3", b"4"]
    assert offsets == [0, 1, 2, 3, 4]


async def test_the_leader_takes_only_router_objects_of_live_brokers_from_members(
    leader: FakeLeader, store: MemoryObjectStore
) -> None:
    data, refs = objects.encode_segments([objects.Segment("t", 1, b"payload")])
    key = objects.new_key(1)
    await store.put(key, data)
    await store.put("wal/1/secret", data)

    def envelope(key: str, refs: Sequence[objects.SegmentRef] = refs) -> EnvelopeRequest:
        return EnvelopeRequest(
            request_data=wire.encode(wire.RoutedRequest(key, -1, 1000, None, "c", tuple(refs))),
            request_principal=b"User:ANONYMOUS",
            client_host_address=b"10.0.0.5",
        )

    def ctx(host: str = "127.0.0.1") -> RequestContext:
        return RequestContext(leader.broker, 58, 0, 1, "peer", host)  # type: ignore[arg-type]

    refused = ErrorCode.cluster_authorization_failed
    assert (await serve(ctx(), envelope("wal/1/secret"), leader.append)).error_code == refused
    assert (await serve(ctx(), envelope(objects.new_key(3)), leader.append)).error_code == refused
    assert (await serve(ctx(), envelope(objects.new_key(9)), leader.append)).error_code == refused
    assert (await serve(ctx("10.1.2.3"), envelope(key), leader.append)).error_code == refused
    other = [objects.SegmentRef("t", 2, refs[0].position, refs[0].size)]
    bad = await serve(ctx(), envelope(key, other), leader.append)
    assert bad.error_code == ErrorCode.invalid_request
    bad = await serve(
        ctx(),
        EnvelopeRequest(request_data=b"junk", request_principal=None, client_host_address=b""),
        leader.append,
    )
    assert bad.error_code == ErrorCode.invalid_request
    assert leader.appended == {}
    ok = await serve(ctx(), envelope(key), leader.append)
    assert ok.error_code == ErrorCode.none and leader.appended == {("t", 1): [b"payload"]}


async def test_a_missing_router_object_gives_a_retriable_storage_error(leader: FakeLeader) -> None:
    ref = objects.SegmentRef("t", 1, 0, 30)
    request = EnvelopeRequest(
        request_data=wire.encode(
            wire.RoutedRequest(objects.new_key(1), 1, 1000, None, None, (ref,))
        ),
        request_principal=None,
        client_host_address=b"",
    )
    ctx = RequestContext(leader.broker, 58, 0, 1, "peer", "127.0.0.1")  # type: ignore[arg-type]
    answer = await serve(ctx, request, leader.append)
    assert answer.error_code == ErrorCode.none and answer.response_data is not None
    from ingest.zone_router import responses

    (result,) = responses.results_of(responses.decode(answer.response_data))
    assert result[1].error_code == ErrorCode.kafka_storage_error


async def test_orphans_older_than_the_age_limit_are_swept(store: MemoryObjectStore) -> None:
    router = ZoneRouter(1, store, send=None)
    old, new = objects.new_key(2, now_s=1000.0), objects.new_key(2, now_s=1250.0)
    for k in (old, new, "wal/keep"):
        await store.put(k, b"x")
    assert await router.sweep(now_s=1400.0) == 1
    assert [i.key for i in await store.list()] == sorted([new, "wal/keep"])
    router.close()


async def test_the_leader_takes_envelopes_only_on_its_inter_broker_listener(
    leader: FakeLeader, store: MemoryObjectStore
) -> None:
    from types import SimpleNamespace

    data, refs = objects.encode_segments([objects.Segment("t", 1, b"payload")])
    key = objects.new_key(1)
    await store.put(key, data)
    request = EnvelopeRequest(
        request_data=wire.encode(wire.RoutedRequest(key, -1, 1000, None, "c", tuple(refs))),
        request_principal=None,
        client_host_address=b"10.0.0.5",
    )
    leader.broker.inter_broker_listener = "INTERNAL"  # type: ignore[attr-defined]

    def ctx(listener: str) -> RequestContext:
        session = SimpleNamespace(
            listener=SimpleNamespace(name=listener), principal="User:ANONYMOUS"
        )
        return RequestContext(leader.broker, 58, 0, 1, "peer", "127.0.0.1", session)  # type: ignore[arg-type]

    answer = await serve(ctx("EXTERNAL"), request, leader.append)
    assert answer.error_code == ErrorCode.cluster_authorization_failed and leader.appended == {}
    answer = await serve(ctx("INTERNAL"), request, leader.append)
    assert answer.error_code == ErrorCode.none and leader.appended == {("t", 1): [b"payload"]}


async def test_a_leader_without_an_inter_broker_listener_is_not_asked(proxy: FakeBroker) -> None:
    from ingest.cluster.view import ListenerEndpoint

    proxy.inter_broker_listener = "INTERNAL"  # type: ignore[attr-defined]
    external = ListenerEndpoint("EXTERNAL", "127.0.0.1", 9103, "SASL_SSL")
    proxy.cluster.members[2] = BrokerEndpoint(3, "127.0.0.1", 9003, "b", (external,))
    routing = routed_produce(_ctx(proxy), _request({1: b"x"}))
    assert routing is not None and routing.leaders == {3: None}
    got = _results(await routing.run(Direct()))
    assert got[("t", 1)].error_code == ErrorCode.not_leader_or_follower


async def test_with_an_authorizer_only_a_login_with_cluster_action_hands_over_produce(
    leader: FakeLeader, store: MemoryObjectStore
) -> None:
    from types import SimpleNamespace

    from ingest.security.acl import Authorizer, MemoryAclStore
    from ingest.security.listeners import SecurityProtocol

    data, refs = objects.encode_segments([objects.Segment("t", 1, b"payload")])
    key = objects.new_key(1)
    await store.put(key, data)
    request = EnvelopeRequest(
        request_data=wire.encode(wire.RoutedRequest(key, -1, 1000, None, "c", tuple(refs))),
        request_principal=b"User:app",
        client_host_address=b"10.0.0.5",
    )
    leader.broker.authorizer = Authorizer(MemoryAclStore(), ["User:broker"])  # type: ignore[attr-defined]

    def ctx(principal: str) -> RequestContext:
        listener = SimpleNamespace(name="PLAINTEXT", protocol=SecurityProtocol.PLAINTEXT)
        session = SimpleNamespace(listener=listener, principal=principal)
        return RequestContext(leader.broker, 58, 0, 1, "peer", "127.0.0.1", session)  # type: ignore[arg-type]

    for sender in ("User:ANONYMOUS", "User:app"):  # a client that found the port
        answer = await serve(ctx(sender), request, leader.append)
        assert answer.error_code == ErrorCode.cluster_authorization_failed, sender
    assert leader.appended == {}
    answer = await serve(ctx("User:broker"), request, leader.append)
    assert answer.error_code == ErrorCode.none and leader.appended == {("t", 1): [b"payload"]}


class _Writer:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


async def test_a_stopping_broker_closes_its_router_after_its_deletions(
    store: MemoryObjectStore,
) -> None:
    broker = FakeBroker(1, store)
    router = router_of(broker)
    assert router is not None and router._peers is not None
    writer = _Writer()
    router._peers._idle[("127.0.0.1", 9003)] = [(None, writer)]  # type: ignore[list-item]
    deleted = asyncio.Event()

    async def deletion() -> None:
        await asyncio.sleep(0.05)
        deleted.set()

    router.spawn(deletion())
    await close_router(broker)
    assert deleted.is_set(), "the router's background deletions finish before it closes"
    assert writer.closed, "its kept-open connections to leaders are closed"
    assert router_of(broker) is not router, "the next use makes a new router"
