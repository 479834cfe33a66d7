"""The dispatcher and every handler, in process, for every API the broker
serves: a mutated request either gets a response that encodes (and reads back
as that API's response), or the connection is closed with a one-line reason
(``ConnectionAbort``). Never an unhandled exception, never a hang."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.serial.errors import OutOfBoundValue

from ingest.broker import Broker
from ingest.config import BrokerConfig
from ingest.metadata.memory import MemoryMetadataStore
from ingest.protocol.codec import is_flexible, response_class
from ingest.protocol.records import build_batch
from ingest.s3stream import MemoryStreamEngine
from ingest.server.connection import ConnectionAbort, ProduceOrder
from ingest.server.dispatcher import Dispatcher
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.frames import GROUP, TOPICS, random_frame, request_frame, served_versions

VERSIONS = served_versions()
API_KEYS = sorted({k for k, _ in VERSIONS})
BY_KEY = {k: [v for kk, v in VERSIONS if kk == k] for k in API_KEYS}
# No request may take longer: Fetch waits are capped at 200 ms, group
# session timeouts at 2 s, and the initial rebalance delay is 0.
DEADLINE_S = 8.0


class _Conn:
    """What the dispatcher needs of a connection."""

    peer = "fuzz"

    def __init__(self) -> None:
        self.aborted = False
        self.produce_order = ProduceOrder()  # as a KafkaConnection has: Produce runs eagerly

    def abort(self) -> None:
        self.aborted = True


class _Harness:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        config = BrokerConfig(
            port=0,
            fetch_max_wait_cap_ms=200,
            group_min_session_timeout_ms=10,
            group_max_session_timeout_ms=2000,
            group_initial_rebalance_delay_ms=0,
        )
        self.broker = Broker(config, MemoryMetadataStore(), MemoryStreamEngine())
        self.loop.run_until_complete(self._start())
        self.dispatcher = Dispatcher(self.broker)

    async def _start(self) -> None:
        b = self.broker
        await b.engine.start()
        b.cluster_id = "fuzz-cluster"
        await b.logs.load()
        await b.groups.start()
        for name in TOPICS:
            await b.logs.create_topic(name, 2, 1, {})
            for p in (0, 1):
                log = b.logs.partition(name, p)
                assert log is not None
                batch = build_batch([(b"k", b"v", [], 1_700_000_000_000 + i) for i in range(3)])
                outcome = log.append(batch)
                assert outcome.durable is not None, outcome
                await outcome.durable
        await b.groups.commit_offsets(
            group_id=GROUP,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            offsets=[(TOPICS[0], 0, 1, -1, "m")],
        )

    def close(self) -> None:
        async def stop() -> None:
            await self.broker.groups.close()
            await self.broker.engine.close()

        self.loop.run_until_complete(stop())
        self.loop.close()

    def dispatch(self, frame: bytes) -> str:
        """Run one frame; returns "response", "closed", "no response" or
        "failed without response" (Produce acks=0 whose append failed: Kafka
        closes the connection, the only way such a producer hears of it)."""
        return self.loop.run_until_complete(self._dispatch(frame))

    async def _dispatch(self, frame: bytes) -> str:
        # Inside the loop, as the connection calls it from data_received.
        conn = _Conn()
        try:
            result = self.dispatcher(memoryview(frame), conn)  # type: ignore[arg-type]
        except ConnectionAbort as exc:
            assert "\n" not in str(exc), "the reason is logged on one line"
            return "closed"
        if result is None:
            await self._settle_background(conn)
            return "failed without response" if conn.aborted else "no response"
        try:
            data = await asyncio.wait_for(result, DEADLINE_S)
        except ConnectionAbort:
            return "closed"
        except TimeoutError:
            raise AssertionError(f"request not answered within {DEADLINE_S} s") from None
        assert isinstance(data, bytes)
        self._check_response(frame, data)
        return "response"

    async def _settle_background(self, conn: _Conn) -> None:
        pending = list(self.dispatcher._background)
        if pending:
            done, _ = await asyncio.wait(pending, timeout=DEADLINE_S)
            assert len(done) == len(pending), "request without response still running"
            for task in done:  # a failure closes the connection; it must be a one-liner
                if not task.cancelled() and task.exception() is not None:
                    assert conn.aborted

    @staticmethod
    def _check_response(frame: bytes, data: bytes) -> None:
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        size = int.from_bytes(data[0:4], "big")
        assert size == len(data) - 4
        pos = 8
        if api_key != 18 and is_flexible(api_key, version):
            assert data[pos] == 0
            pos += 1
        elif api_key == 18 and not (0 <= version <= 4):
            version = 0
        try:
            entity_reader(response_class(api_key, version))(memoryview(data), pos)
        except OutOfBoundValue as exc:
            # DescribeTransactions answers an id without an open transaction
            # with Kafka's start time -1, which kio's reader refuses (its
            # writer does not); the size and header were checked above.
            if not (api_key == _DESCRIBE_TRANSACTIONS and "negative timestamp" in str(exc)):
                raise


_DESCRIBE_TRANSACTIONS = 65


@pytest.fixture(scope="module")
def harness() -> Iterator[_Harness]:
    # Handlers log what they refuse; keep the output readable.
    logging.getLogger("ingest").setLevel(logging.WARNING)
    h = _Harness()
    try:
        yield h
    finally:
        h.close()


@pytest.mark.parametrize("api_key", API_KEYS)
def test_mutated_requests_get_a_response_or_a_clean_close(harness: _Harness, api_key: int) -> None:
    outcomes: dict[str, int] = {}

    @fuzz_settings(60)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(BY_KEY[api_key]))
        mutate = data.draw(st.integers(0, 3)) > 0  # a quarter well-formed
        outcome = harness.dispatch(data.draw(request_frame(api_key, version, mutate)))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    run()
    # Not only closes: the generator must reach the handlers.
    assert outcomes.get("response", 0) + outcomes.get("no response", 0) > 0, outcomes


@fuzz_settings(len(VERSIONS))
@given(st.data())
def test_well_formed_requests_are_answered(harness: _Harness, data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    frame = data.draw(request_frame(api_key, version, mutate=False))
    outcome = harness.dispatch(frame)
    if api_key == 0 and outcome == "failed without response":
        # A well-formed acks=0 Produce may still fail (a null record set, a
        # topic that does not exist): the close is the answer Kafka defines.
        assert _acks(frame) == 0
        return
    assert outcome in ("response", "no response")


def _acks(frame: bytes) -> int:
    """The acks of a well-formed Produce frame, read back by the broker's codec."""
    from ingest.protocol.codec import decode_request, parse_request_header

    view = memoryview(frame)
    return int(decode_request(parse_request_header(view), view).acks)


@fuzz_settings(len(VERSIONS))
@given(st.data())
def test_random_bodies_get_a_response_or_a_clean_close(
    harness: _Harness, data: st.DataObject
) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    harness.dispatch(data.draw(random_frame(api_key, version)))


def _list_offsets(harness: _Harness, version: int, values: dict[str, object]) -> object:
    import io

    from kio.serial import entity_writer

    from ingest.protocol.codec import build, request_class
    from tests.fuzz.frames import header_bytes

    cls = request_class(2, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, values))
    frame = header_bytes(2, version, 7) + buf.getvalue()
    data = harness.loop.run_until_complete(harness.dispatcher(memoryview(frame), _Conn()))  # type: ignore[arg-type]
    pos = 9 if is_flexible(2, version) else 8
    entity, _ = entity_reader(response_class(2, version))(memoryview(data), pos)
    return entity


@pytest.fixture
def fresh() -> Iterator[_Harness]:
    """A broker of its own: the fuzz tests delete and alter the shared one's topics."""
    h = _Harness()
    try:
        yield h
    finally:
        h.close()


def test_list_offsets_partition_named_twice_gets_invalid_request(fresh: _Harness) -> None:
    part = {"partition_index": 0, "timestamp": -1}
    resp = _list_offsets(
        fresh,
        8,
        {
            "replica_id": -1,
            "topics": [
                {"name": TOPICS[0], "partitions": [part, part]},
                {"name": TOPICS[1], "partitions": [part]},
            ],
        },
    )
    codes = [[int(p.error_code) for p in t.partitions] for t in resp.topics]  # type: ignore[attr-defined]
    assert codes == [[42, 42], [0]]
    assert resp.topics[1].partitions[0].offset == 3  # type: ignore[attr-defined]


def test_list_offsets_unknown_isolation_level_gets_invalid_request(fresh: _Harness) -> None:
    resp = _list_offsets(
        fresh,
        5,
        {
            "replica_id": -1,
            "isolation_level": 7,
            "topics": [
                {"name": TOPICS[0], "partitions": [{"partition_index": 0, "timestamp": -2}]}
            ],
        },
    )
    assert int(resp.topics[0].partitions[0].error_code) == 42  # type: ignore[attr-defined]
