"""Produce (key 0): append record batches; acks 0, 1 and all.

Every partition's append is issued synchronously, in request order (a
compressed batch is inflated and checked in a worker thread; its partition
keeps the order of appends behind it, see :meth:`PartitionLog.submit`). What
may wait before that (a quota's throttle; in a cluster, a partition moving to
this broker) waits under the connection's ``produce_order`` lock, so that
pipelined requests of one connection append in arrival order. The response waits until the appends are
durable (fsync'd in the WAL), for acks=1 as well as acks=all since the WAL's
group commit makes that cheap, but never longer than the request's timeout
(acks=all; at least ``_MIN_WAIT_S``) or ``_NO_TIMEOUT_WAIT_S`` (acks 0 and
1, whose timeout Kafka ignores): a partition still waiting then gets
REQUEST_TIMED_OUT. Its append goes on; a retry of an idempotent batch finds it.

The common request (acks 1 or all, no quota to count, no partition moving
or routed) takes no task at all (:func:`eager`): its appends are issued as
the dispatcher frames it, the slots are watched with callbacks
(:class:`_Settlement`) and the response is written from the callback that
makes the last append durable. A task costs the request three turns of the
event loop (its first step, its wake-up, its done callback) on the
critical path, about 15 us of the 150 a one-partition request costs.

The response's throttle time is the engine's ``backpressure_ms`` (above 0
while object storage is degraded or uploads fall behind: the records are
accepted and the client slows down), or more when an append was refused for
backpressure.

The response is built as a version 11 entity (every field any version has);
the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union, cast

from kio.schema.produce import v3, v4, v5, v6, v7, v8, v9, v10, v11
from kio.schema.produce.v11.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.cluster.racks import PRODUCE, client_id_rack
from ingest.handlers.base import Early, RequestContext, Respond
from ingest.handlers.txn_common import refusal
from ingest.log.partition import AppendOutcome
from ingest.protocol.errors import ErrorCode, error_class
from ingest.protocol.records import BATCH_HEADER_SIZE, read_header
from ingest.security import quota_enforce as quotas
from ingest.security.acl import enforce as acl
from ingest.zone_router import routed_produce

__all__ = ["handle", "handle_direct", "eager", "no_response", "ProduceRequest"]

ProduceRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v3.ProduceRequest,
    v4.ProduceRequest,
    v5.ProduceRequest,
    v6.ProduceRequest,
    v7.ProduceRequest,
    v8.ProduceRequest,
    v9.ProduceRequest,
    v10.ProduceRequest,
    v11.ProduceRequest,
]

_BACKPRESSURE_THROTTLE_MS = 1000
_MIN_WAIT_S = 1.0  # an fsync'd append is the leader's own write: never time it out sooner
MOVE_WAIT_S = 5.0  # how long a request waits for a partition moving between brokers
_NO_TIMEOUT_WAIT_S = 30.0  # acks 0 and 1: Kafka's default request.timeout.ms
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def no_response(request: ProduceRequest) -> bool:
    return int(request.acks) == 0


@dataclass(slots=True)
class _Slot:
    """One partition of the request: its pending or final outcome."""

    index: int
    outcome: AppendOutcome | asyncio.Future[AppendOutcome]
    error_message: str | None = None

    def final(self) -> AppendOutcome:
        assert isinstance(self.outcome, AppendOutcome)
        return self.outcome


async def _settle_moves(ctx: RequestContext, request: ProduceRequest) -> None:
    """Partitions of the request that this broker does not serve right now
    may be moving to or from it: wait for that before any append is issued
    (so appends still go out in request order), bounded by the request's
    timeout and MOVE_WAIT_S."""
    logs = ctx.broker.logs
    wait = min(MOVE_WAIT_S, max(0.0, request.timeout.total_seconds()))
    missing = {
        (t.name, int(p.index))
        for t in request.topic_data
        for p in t.partition_data
        if logs.partition(t.name, int(p.index)) is None
    }
    if missing and wait > 0:
        await asyncio.gather(*(ctx.broker.await_partition(n, i, wait) for n, i in missing))


def _payload_bytes(request: ProduceRequest) -> int:
    return sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    ctx.broker.rack_traffic.add(client_id_rack(ctx.client_id), PRODUCE, _payload_bytes(request))
    # A client of this broker's rack producing to partitions led elsewhere:
    # their batches go to the leaders through object storage (zone router).
    routing = routed_produce(ctx, request)
    if routing is not None:
        return await routing.run(handle_direct)
    return await handle_direct(ctx, request)


async def handle_direct(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    """Produce on this broker, never routed; also how a leader appends the
    batches a broker of the client's rack routed to it."""
    acks = int(request.acks)
    upfront: tuple[ErrorCode, str] | None = None
    if acks not in (0, 1, -1):
        upfront = (ErrorCode.invalid_required_acks, f"acks must be 0, 1 or -1, got {acks}")
    elif request.transactional_id is not None:
        refused = refusal(ctx, request.transactional_id)
        if refused is not None:
            upfront = (refused, "this broker cannot take the transaction's records")
    # What may wait before the appends are issued (a quota's throttle; in a
    # cluster, a partition moving here) waits under the connection's lock, so
    # that pipelined requests still append in arrival order: a later request
    # must not append later idempotent sequences while an earlier one waits.
    if ctx.produce_order is not None:
        async with ctx.produce_order:
            quota_ms, results = await _admit_and_submit(ctx, request, upfront)
    else:
        quota_ms, results = await _admit_and_submit(ctx, request, upfront)
    slots = [s for _, parts in results for s in parts]
    await _settle(slots, asyncio.get_running_loop().time() + _wait_s(request))
    if acks == 0:
        # Nobody hears back; a failure is raised so that the dispatcher closes
        # the connection, which is how Kafka tells an acks=0 producer.
        for name, parts in results:
            for slot in parts:
                out = slot.final()
                if out.error != ErrorCode.none:
                    raise error_class(out.error)(
                        f"acks=0 produce to {name}-{slot.index} failed: {out.message}"
                    )
        return None
    return _response_of(ctx, results, slots, quota_ms)


def _wait_s(request: ProduceRequest) -> float:
    """How long the response waits for the appends to be durable."""
    if int(request.acks) == -1:
        return max(_MIN_WAIT_S, request.timeout.total_seconds())
    return _NO_TIMEOUT_WAIT_S


def _response_of(
    ctx: RequestContext, results: list[tuple[str, list[_Slot]]], slots: list[_Slot], quota_ms: int
) -> ProduceResponse:
    throttle_ms = _BACKPRESSURE_THROTTLE_MS if any(s.final().throttled for s in slots) else 0
    # Object storage degraded or uploads behind: the records are accepted,
    # the client is asked to slow down before it is refused.
    throttle_ms = max(throttle_ms, ctx.broker.engine.backpressure_ms)
    throttle_ms = max(throttle_ms, quota_ms)
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(
                name=TopicName(name), partition_responses=tuple(_response(s) for s in parts)
            )
            for name, parts in results
        ),
        throttle_time=(
            _NO_THROTTLE
            if not throttle_ms
            else i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms))
        ),
    )


def eager(ctx: RequestContext, request: ProduceRequest) -> _EagerProduce | None:
    """The request served without a task (see ``ApiSpec.eager``), when nothing
    has to wait before its appends are issued: acks 1 or -1, no quota to
    count, every partition served here or not at all (in a cluster, none
    moving in), none routed through the zone router. The dispatcher offers
    it only when no earlier Produce of the connection is still on the task
    path, so appends keep the connection's arrival order."""
    acks = int(request.acks)
    if acks not in (1, -1) or quotas.active(ctx):
        return None
    if ctx.broker.cluster.clustered:
        logs = ctx.broker.logs
        for t in request.topic_data:
            for p in t.partition_data:
                if logs.partition(t.name, int(p.index)) is None:
                    return None
        if routed_produce(ctx, request) is not None:
            return None
    return _EagerProduce(ctx, request)


class _EagerProduce:
    __slots__ = ("_ctx", "_request", "_results", "_slots", "_respond", "_answered", "_early")

    def __init__(self, ctx: RequestContext, request: ProduceRequest) -> None:
        self._ctx = ctx
        self._request = request
        self._answered: Callable[[], bool] | None = None  # a response lent to the WAL's writer
        self._early: ProduceResponse | None = None

    def run(self, respond: Respond, early: Early | None = None) -> None:
        ctx, request = self._ctx, self._request
        ctx.broker.rack_traffic.add(client_id_rack(ctx.client_id), PRODUCE, _payload_bytes(request))
        upfront: tuple[ErrorCode, str] | None = None
        if request.transactional_id is not None:
            refused = refusal(ctx, request.transactional_id)
            if refused is not None:
                upfront = (refused, "this broker cannot take the transaction's records")
        self._respond = respond
        self._results = _submit(ctx, request, upfront)
        self._slots = [s for _, parts in self._results for s in parts]
        deadline = asyncio.get_running_loop().time() + _wait_s(request)
        _Settlement(self._slots, deadline, self._settled)
        if early is not None and _durable_only(self._slots) and not ctx.broker.cluster.clustered:
            # only the fsync is left: the response it will get goes to the
            # WAL's writer, which sends it right after (a cluster's broker
            # also checks, once durable, that it still owns the partitions)
            self._answered = early(self._early_response)

    def _early_response(self) -> ProduceResponse:
        self._early = _response_of(self._ctx, self._results, self._slots, 0)
        return self._early

    def _settled(self) -> None:
        if self._answered is not None and self._answered():
            self._respond(self._early, None)  # the WAL's writer sent it: for the metrics
            return
        try:
            response = _response_of(self._ctx, self._results, self._slots, 0)
        except Exception as exc:  # noqa: BLE001 - the connection hears of it, and closes
            self._respond(None, exc)
            return
        self._respond(response, None)


def _durable_only(slots: list[_Slot]) -> bool:
    """Every append is issued and what is left to wait for is durability."""
    pending = False
    for s in slots:
        out = s.outcome
        if not isinstance(out, AppendOutcome):
            return False
        fut = out.durable_future
        if fut is not None and out.error == ErrorCode.none and not fut.done():
            pending = True
    return pending


def _not_in_transaction(
    ctx: RequestContext, request: ProduceRequest, topic: str, index: int, records: bytes
) -> tuple[ErrorCode, str] | None:
    """A transactional producer may write only to partitions it added to its
    open transaction (checked by the coordinator, KIP-890): a batch outside
    one would hold the partition's last stable offset back forever."""
    tid = request.transactional_id
    if tid is None or len(records) < BATCH_HEADER_SIZE:
        return None  # a short payload fails the partition's own checks
    header = read_header(records)
    if not header.is_transactional:
        return None
    code = ctx.broker.txns.produce_check(
        tid, header.producer_id, header.producer_epoch, (topic, index)
    )
    if code == ErrorCode.none:
        return None
    if code == ErrorCode.invalid_producer_epoch:
        why = (
            f"epoch {header.producer_epoch} of producer {header.producer_id} is below the "
            f"current epoch of transactional id {tid!r}: it was fenced"
        )
    elif code == ErrorCode.invalid_producer_id_mapping:
        why = f"producer {header.producer_id} is not the producer of transactional id {tid!r}"
    else:
        why = f"partition {topic}-{index} is not in an open transaction of {tid!r}"
    return code, why


async def _admit_and_submit(
    ctx: RequestContext, request: ProduceRequest, upfront: tuple[ErrorCode, str] | None
) -> tuple[int, list[tuple[str, list[_Slot]]]]:
    quota_ms = await quotas.admit_produce(ctx, request)  # over its quota: waits first
    if upfront is None and ctx.broker.cluster.clustered:
        await _settle_moves(ctx, request)
    return quota_ms, _submit(ctx, request, upfront)


def _submit(
    ctx: RequestContext, request: ProduceRequest, upfront: tuple[ErrorCode, str] | None
) -> list[tuple[str, list[_Slot]]]:
    """Issue every partition's append (synchronously, in request order)."""
    logs = ctx.broker.logs
    results: list[tuple[str, list[_Slot]]] = []
    for t in request.topic_data:
        parts: list[_Slot] = []
        denied = upfront or acl.produce_denied(ctx, request.transactional_id, t.name)
        for p in t.partition_data:
            index = int(p.index)
            if denied is not None:
                parts.append(_failed(index, *denied))
                continue
            log = logs.partition(t.name, index)
            if log is None:
                parts.append(_failed(index, logs.partition_error(t.name, index), None))
            elif p.records is None:
                parts.append(_failed(index, ErrorCode.invalid_record, "no records"))
            elif (why := _not_in_transaction(ctx, request, t.name, index, p.records)) is not None:
                parts.append(_failed(index, *why))
            else:
                parts.append(_Slot(index, log.submit(p.records)))
        results.append((t.name, parts))
    return results


async def _settle(slots: list[_Slot], deadline: float) -> None:
    """Wait (until ``deadline``) for every append to be issued and durable;
    leaves a final outcome in every slot. Nothing awaited here is cancelled,
    by a timeout or by this handler's own cancellation: the partitions'
    futures are watched with callbacks, never awaited."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def settled() -> None:
        if not waiter.done():  # cancelling the handler cancels the waiter alone
            waiter.set_result(None)

    _Settlement(slots, deadline, settled)
    await waiter


class _Settlement:
    """Watches a request's slots, with callbacks, until every append is
    issued and durable or ``deadline`` passes; then leaves a final outcome in
    every slot and calls ``done`` (once, from ``__init__`` when nothing is
    pending). One timer for the request, one callback per future: no task, no
    ``asyncio.wait`` (a future, a timer and a set per call)."""

    __slots__ = ("_slots", "_done", "_left", "_timer", "_finished")

    def __init__(self, slots: list[_Slot], deadline: float, done: Callable[[], None]) -> None:
        self._slots = slots
        self._done = done
        self._finished = False
        self._timer: asyncio.TimerHandle | None = None
        issued = [s.outcome for s in slots if isinstance(s.outcome, asyncio.Future)]
        self._left = len(issued)
        if issued:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._finish)
            for fut in issued:
                fut.add_done_callback(self._one_issued)
        else:
            self._watch_durable(deadline)

    def _one_issued(self, _fut: asyncio.Future[AppendOutcome]) -> None:
        self._left -= 1
        if not self._left and not self._finished:
            self._take_issued()
            self._watch_durable(None)

    def _take_issued(self) -> None:
        for s in self._slots:
            fut = s.outcome
            if isinstance(fut, asyncio.Future) and fut.done():
                if fut.cancelled() or fut.exception() is not None:  # shutdown, or a bug
                    why = "cancelled" if fut.cancelled() else fut.exception()
                    s.outcome = AppendOutcome(
                        ErrorCode.kafka_storage_error, message=f"append failed: {why}"
                    )
                else:
                    s.outcome = fut.result()

    def _watch_durable(self, deadline: float | None) -> None:
        pending = [
            durable
            for s in self._slots
            if (durable := s.final().durable_future) is not None
            and not durable.done()
            and s.final().error == ErrorCode.none
        ]
        if not pending:
            self._finish()
            return
        self._left = len(pending)
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._finish)
        for fut in pending:
            fut.add_done_callback(self._one_durable)

    def _one_durable(self, _fut: asyncio.Future[int]) -> None:
        self._left -= 1
        if not self._left:
            self._finish()

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._timer is not None:
            self._timer.cancel()
        try:
            self._finalize()
        finally:  # whatever happened, the request is answered (or its connection closed)
            self._done()

    def _finalize(self) -> None:
        self._take_issued()
        for s in self._slots:
            if isinstance(s.outcome, asyncio.Future):
                s.outcome.add_done_callback(_retrieve)
                s.outcome = _timed_out("its records are being checked")
                continue
            out = s.outcome
            durable = out.durable_future
            if durable is None or out.error != ErrorCode.none:
                continue
            if not durable.done():
                durable.add_done_callback(_retrieve)
                s.outcome = _timed_out("the append is not durable yet")
            elif durable.cancelled() or durable.exception() is not None:
                error = "cancelled" if durable.cancelled() else durable.exception()
                s.outcome = AppendOutcome(
                    ErrorCode.kafka_storage_error,
                    log_start_offset=out.log_start_offset,
                    message=f"append failed: {error}",
                )


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a late outcome's exception as seen (the response already went out)."""
    if not fut.cancelled():
        fut.exception()


def _timed_out(why: str) -> AppendOutcome:
    return AppendOutcome(ErrorCode.request_timed_out, message=f"timed out: {why}")


def _failed(index: int, code: ErrorCode, message: str | None) -> _Slot:
    return _Slot(index, AppendOutcome(code, message=message))


def _response(slot: _Slot) -> PartitionProduceResponse:
    out = slot.final()
    ok = out.error == ErrorCode.none
    append_time = None
    if ok and out.log_append_time >= 0:
        append_time = datetime.datetime.fromtimestamp(out.log_append_time / 1000, datetime.UTC)
    # the values are the log's own offsets and the request's partition index
    # (read as an int32): kio's phantom types, plain ints at run time, need
    # no range check (i32(...) costs an isinstance walk per field)
    return PartitionProduceResponse(
        index=cast(i32, slot.index),
        error_code=out.error,
        base_offset=cast(i64, out.base_offset if ok else -1),
        log_append_time=append_time,  # type: ignore[arg-type]
        log_start_offset=cast(i64, out.log_start_offset),
        record_errors=(),
        error_message=out.message,
    )
