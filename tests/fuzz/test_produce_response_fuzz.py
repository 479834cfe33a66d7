"""The Produce response writer gives the bytes kio's generic route gives
(narrowing the handler's v11 entity to the version asked, then kio's writer)
for every response it writes, and leaves to kio what it does not."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.produce.v11.response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.protocol import produce_response
from ingest.protocol.codec import encode_response, response_class
from ingest.server.dispatcher import _response_entity
from tests.fuzz.conftest import fuzz_settings

_text = st.text(max_size=12)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_times = st.none() | st.datetimes(
    min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2200, 1, 1),
    timezones=st.just(datetime.UTC),
)  # fmt: skip
_leaders = st.just(LeaderIdAndEpoch()) | st.builds(
    LeaderIdAndEpoch, leader_id=_i32.map(BrokerId), leader_epoch=_i32.map(i32)
)
_partitions = st.builds(
    PartitionProduceResponse,
    index=_i32.map(i32),
    error_code=st.sampled_from(
        [ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.invalid_record]
    ),
    base_offset=_i64.map(i64),
    log_append_time=_times,
    log_start_offset=_i64.map(i64),
    record_errors=st.lists(
        st.builds(
            BatchIndexAndErrorMessage,
            batch_index=_i32.map(i32),
            batch_index_error_message=st.none() | _text,
        ),
        max_size=2,
    ).map(tuple),
    error_message=st.none() | _text,
    current_leader=_leaders,
)
_responses = st.builds(
    ProduceResponse,
    responses=st.lists(
        st.builds(
            TopicProduceResponse,
            name=_text.map(TopicName),
            partition_responses=st.lists(_partitions, max_size=4).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
    throttle_time=st.integers(0, 2**31 - 1).map(
        lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
    ),
    node_endpoints=st.just(()) | st.lists(
        st.builds(
            NodeEndpoint, node_id=_i32.map(BrokerId), host=_text, port=_i32.map(i32),
            rack=st.none() | _text,
        ),
        min_size=1, max_size=2,
    ).map(tuple),
)  # fmt: skip


def kio_route(version: int, correlation_id: int, response: ProduceResponse) -> bytes:
    entity = _response_entity(response_class(0, version), response)
    return encode_response(0, version, correlation_id, entity)


@pytest.mark.parametrize("version", range(3, 12))
@fuzz_settings(150)
@given(response=_responses, correlation_id=_i32)
def test_the_produce_response_writer_matches_kio(
    version: int, response: ProduceResponse, correlation_id: int
) -> None:
    fast = produce_response.encode(version, correlation_id, response)
    if fast is None:
        # only what the writer leaves to kio: v10+'s tagged fields, when set
        assert version >= 10
        assert response.node_endpoints or any(
            p.current_leader != LeaderIdAndEpoch()
            for t in response.responses
            for p in t.partition_responses
        )
        return
    assert fast == kio_route(version, correlation_id, response)


def test_a_version_it_does_not_know_is_left_to_kio() -> None:
    empty = ProduceResponse(responses=())
    assert produce_response.encode(2, 1, empty) is None
    assert produce_response.encode(12, 1, empty) is None
    assert produce_response.encode(9, 1, empty) == kio_route(9, 1, empty)
