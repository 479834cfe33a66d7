"""A Produce whose client goes away while the append waits to be durable:
the handler is cancelled (the connection cancels what it has in flight), the
append is not. The partition keeps the append's future for duplicate
detection, so the client's retry of the idempotent batch must get the
original offset once the append is durable, not a cancelled future or a
second copy of the records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest

from ingest.broker import Broker
from ingest.log.partition import PartitionLog
from ingest.protocol.errors import ErrorCode
from ingest.server.dispatcher import Dispatcher
from tests.unit.server.test_produce_order import (
    _TOPIC,
    _Conn,
    _frame,
    _outcome,
    single_topic_broker,
)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with single_topic_broker(tmp_path) as b:
        yield b


def _hold_durability(plog: PartitionLog, gate: asyncio.Future[None]) -> asyncio.Event:
    """Appends to ``plog`` become durable only once ``gate`` resolves; the
    event is set once one is issued."""
    append = plog.stream.append
    issued = asyncio.Event()

    def held(payload: bytes | memoryview, count: int) -> Awaitable[int]:
        durable = append(payload, count)
        issued.set()

        async def after_gate() -> int:
            await gate
            return await durable

        return asyncio.ensure_future(after_gate())

    plog.stream.append = held  # type: ignore[method-assign]
    return issued


async def test_a_retry_after_the_client_left_gets_the_original_offset(broker: Broker) -> None:
    plog = broker.logs.partition(_TOPIC, 0)
    assert plog is not None
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    issued = _hold_durability(plog, gate)
    dispatcher = Dispatcher(broker)

    first = asyncio.ensure_future(dispatcher(memoryview(_frame(1, 0)), _Conn()))  # type: ignore[arg-type]
    await asyncio.wait_for(issued.wait(), 10)  # the append is issued, not durable
    first.cancel()  # the client disconnected
    with pytest.raises(asyncio.CancelledError):
        await first

    retry = asyncio.ensure_future(dispatcher(memoryview(_frame(2, 0)), _Conn()))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert not retry.done()  # a duplicate of an append not durable yet waits for it
    gate.set_result(None)
    assert _outcome(await asyncio.wait_for(retry, 10)) == (ErrorCode.none, 0)
    assert plog.log_end_offset == 1  # one copy of the records
    assert plog.high_watermark == 1
