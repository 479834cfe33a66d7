"""How a Produce waits for its appends: every request is answered, whatever
its appends do (checked and durable, failed, cancelled at shutdown, or still
pending at the request's deadline), and the answer says which."""

from __future__ import annotations

import asyncio

from ingest.handlers.produce import _Settlement, _Slot
from ingest.log.partition import AppendOutcome
from ingest.protocol.errors import ErrorCode


def _durable(fut: asyncio.Future[int]) -> AppendOutcome:
    return AppendOutcome(ErrorCode.none, 7, -1, 0, durable_future=fut)


async def test_every_slot_gets_an_outcome_and_the_request_is_answered_once() -> None:
    loop = asyncio.get_running_loop()
    checked: asyncio.Future[AppendOutcome] = loop.create_future()  # checked in a worker
    cancelled: asyncio.Future[AppendOutcome] = loop.create_future()  # its task cancelled
    failing: asyncio.Future[int] = loop.create_future()
    durable: asyncio.Future[int] = loop.create_future()
    slots = [
        _Slot(0, checked),
        _Slot(1, cancelled),
        _Slot(2, _durable(failing)),
        _Slot(3, _durable(durable)),
        _Slot(4, AppendOutcome(ErrorCode.invalid_record, message="no records")),
    ]
    answered: list[int] = []
    _Settlement(slots, loop.time() + 10, lambda: answered.append(1))
    later: asyncio.Future[int] = loop.create_future()
    checked.set_result(_durable(later))
    cancelled.cancel()
    failing.set_exception(OSError("disk gone"))
    durable.set_result(7)
    for _ in range(3):
        await asyncio.sleep(0)
    assert answered == []  # the checked append is not durable yet
    later.set_result(7)
    for _ in range(3):
        await asyncio.sleep(0)
    assert answered == [1]
    codes = [s.final().error for s in slots]
    assert codes == [
        ErrorCode.none,
        ErrorCode.kafka_storage_error,
        ErrorCode.kafka_storage_error,
        ErrorCode.none,
        ErrorCode.invalid_record,
    ]
    assert "disk gone" in (slots[2].final().message or "")


async def test_what_is_still_pending_at_the_deadline_times_out() -> None:
    loop = asyncio.get_running_loop()
    never: asyncio.Future[int] = loop.create_future()
    unchecked: asyncio.Future[AppendOutcome] = loop.create_future()
    slots = [_Slot(0, _durable(never)), _Slot(1, unchecked)]
    answered = loop.create_future()
    _Settlement(slots, loop.time() + 0.05, lambda: answered.set_result(None))
    await asyncio.wait_for(answered, 5)
    assert [s.final().error for s in slots] == [ErrorCode.request_timed_out] * 2
    # what completes after the answer changes nothing and is not reported unseen
    never.set_exception(OSError("late"))
    unchecked.cancel()
    await asyncio.sleep(0)
    assert [s.final().error for s in slots] == [ErrorCode.request_timed_out] * 2
