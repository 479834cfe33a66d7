"""Turns frames into handler calls and handler results into response frames."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ingest.handlers import api_table
from ingest.handlers.base import EagerRun, RequestContext
from ingest.protocol import produce_response
from ingest.protocol.codec import (
    ProtocolError,
    build,
    decode_request,
    encode_response,
    parse_request_header,
    response_class,
)
from ingest.protocol.errors import ErrorCode
from ingest.server.connection import ConnectionAbort, KafkaConnection, ProduceOrder

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["Dispatcher", "RequestObserver"]

RequestObserver = Callable[[int, float, Any, Any], None]
"""Told of each answered request: (api key, seconds spent, request entity,
response entity). Set as ``broker.request_observer`` before the broker starts;
it runs on the event loop, so it must be cheap and must not raise."""

log = logging.getLogger(__name__)
_API_VERSIONS = 18
# Responses written straight from the handler's entity, skipping kio's
# version narrowing and generic writer; None from one means "take kio's route".
_PRODUCE = 0
_DIRECT_WRITERS: dict[int, Callable[[int, int, Any], bytes | None]] = {
    0: produce_response.encode,
}


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.table = api_table()
        self.observer: RequestObserver | None = getattr(broker, "request_observer", None)
        self._background: set[asyncio.Task[Any]] = set()

    def __call__(self, frame: memoryview, conn: KafkaConnection) -> Any:
        if len(frame) < 8:
            raise ConnectionAbort("request header truncated")
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        api_version = int.from_bytes(frame[2:4], "big", signed=True)
        spec = self.table.get(api_key)
        if spec is None:
            raise ConnectionAbort(f"unknown API key {api_key}")
        if not spec.min_version <= api_version <= spec.max_version:
            if api_key == _API_VERSIONS:
                # Kafka answers an ApiVersions request it cannot parse with a
                # v0 response carrying UNSUPPORTED_VERSION and its version list.
                correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
                return self._unsupported_api_versions(correlation_id)
            raise ConnectionAbort(f"unsupported version {api_version} of {spec.name}")
        try:
            header = parse_request_header(frame)
            request = decode_request(header, frame)
        except ProtocolError as exc:
            raise ConnectionAbort(str(exc)) from exc
        if api_key != _PRODUCE:
            # a client may hold a Produce reply the WAL's writer sent before
            # this loop heard that its records are durable: hear of it now,
            # so that a read of them finds them
            self.broker.engine.poll_durable()
        ctx = RequestContext(
            self.broker,
            api_key,
            api_version,
            header.correlation_id,
            header.client_id,
            conn.peer,
            getattr(conn, "session", None),  # test doubles may lack one
            getattr(conn, "produce_order", None),
        )
        order = ctx.produce_order if spec.eager is not None else None
        if spec.no_response is not None and spec.no_response(request):
            task = asyncio.ensure_future(spec.handler(ctx, request))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            task.add_done_callback(lambda t: _close_if_failed(t, conn))
            _count_task(order, task)
            return None
        if spec.eager is not None and _may_run_eagerly(order):
            run = spec.eager(ctx, request)
            if run is not None:
                return self._run_eager(ctx, run, request, conn)
        if order is None:
            return self._run(ctx, spec.handler, request)
        task = asyncio.ensure_future(self._run(ctx, spec.handler, request))
        _count_task(order, task)
        return task

    def _run_eager(
        self, ctx: RequestContext, run: EagerRun, request: Any, conn: KafkaConnection
    ) -> asyncio.Future[bytes | None] | None:
        """Serve ``run`` without a task: its response is written from the
        callback that completes it (a connection's :meth:`~KafkaConnection.open_reply`),
        or, from a connection without one (a test's), through the future returned."""
        started = time.perf_counter()
        opener = getattr(conn, "open_reply", None)
        reply: asyncio.Future[bytes | None] = (
            opener() if opener is not None else asyncio.get_running_loop().create_future()
        )

        def respond(result: Any, error: BaseException | None) -> None:
            framed: bytes | None = None
            if opener is not None and reply.done():
                # the WAL's writer sent the response it was lent (or the
                # connection is gone): nothing to encode
                if self.observer is not None and error is None:
                    self.observer(ctx.api_key, time.perf_counter() - started, request, result)
                return
            if error is None:
                try:
                    framed = self._frame(ctx, started, request, result)
                except Exception as exc:  # noqa: BLE001 - the connection closes, logged there
                    error = exc
            if opener is not None:
                conn.deliver(reply, framed, error)
            elif not reply.done():
                if error is None:
                    reply.set_result(framed)
                else:
                    reply.set_exception(error)

        def early(build: Callable[[], Any]) -> Callable[[], bool] | None:
            if not conn.may_lend(reply):
                return None
            engine = self.broker.engine
            if not conn.lending:
                # the first of a run (a request waited for alone): its fsync
                # starts while the response is built; pipelined ones behind
                # it keep sharing the group commit of the loop iteration
                engine.sync_now()
            try:
                framed = self._encode(ctx, build())
            except Exception:  # noqa: BLE001 - the handler's own answer will say it
                return None
            if not conn.lend(reply, framed, engine):
                return None
            return reply.done

        run.run(respond, early if opener is not None and hasattr(conn, "may_lend") else None)
        return None if opener is not None else reply

    async def _run(self, ctx: RequestContext, handler: Any, request: Any) -> bytes:
        started = time.perf_counter()
        result = await handler(ctx, request)
        return self._frame(ctx, started, request, result)

    def _encode(self, ctx: RequestContext, result: Any) -> bytes:
        """The response frame of a handler's ``result``."""
        return self._encoded(ctx, result)[0]

    def _encoded(self, ctx: RequestContext, result: Any) -> tuple[bytes, Any]:
        """The response frame of ``result``, and the response as encoded
        (``result`` itself for an API with a direct writer, else the entity)."""
        direct = _DIRECT_WRITERS.get(ctx.api_key)
        if direct is not None:
            framed = direct(ctx.api_version, ctx.correlation_id, result)
            if framed is not None:
                return framed, result
        entity = _response_entity(response_class(ctx.api_key, ctx.api_version), result)
        return encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, entity), entity

    def _frame(self, ctx: RequestContext, started: float, request: Any, result: Any) -> bytes:
        """The response frame of a handler's ``result``; tells the observer."""
        framed, response = self._encoded(ctx, result)
        if self.observer is not None:
            self.observer(ctx.api_key, time.perf_counter() - started, request, response)
        return framed

    async def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        from ingest.handlers.api_versions import api_keys

        entity = build(
            response_class(_API_VERSIONS, 0),
            {"error_code": ErrorCode.unsupported_version, "api_keys": api_keys()},
        )
        return encode_response(_API_VERSIONS, 0, correlation_id, entity)


def _response_entity(cls: type[Any], result: Any) -> Any:
    """The response entity ``cls`` from what a handler returned: a mapping, or
    a typed kio response entity of any version of the API (narrowed to ``cls``
    by field name when it is another version)."""
    if type(result) is cls:
        return result
    if isinstance(result, Mapping):
        return build(cls, result)
    return build(cls, _entity_fields(result))


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _entity_fields(entity: Any) -> dict[str, Any]:
    cls = type(entity)
    names = _FIELD_NAMES.get(cls)
    if names is None:  # dataclasses.fields() is slow; every response narrows
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(entity))
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(entity, name)
        if hasattr(type(value), "__dataclass_fields__"):
            value = _entity_fields(value)
        elif type(value) is tuple and value and hasattr(type(value[0]), "__dataclass_fields__"):
            value = tuple(_entity_fields(v) for v in value)
        out[name] = value
    return out


def _may_run_eagerly(order: asyncio.Lock | None) -> bool:
    """No earlier Produce of the connection is still on the task path (which
    it may take for what it waits for before appending): a request served
    eagerly now cannot overtake one."""
    return isinstance(order, ProduceOrder) and not order.tasks and not order.locked()


def _count_task(order: asyncio.Lock | None, task: asyncio.Future[Any]) -> None:
    if isinstance(order, ProduceOrder):
        order.tasks += 1
        task.add_done_callback(order.task_done)


def _close_if_failed(task: asyncio.Task[Any], conn: KafkaConnection) -> None:
    """A request without a response (Produce acks=0) that failed closes its
    connection, as Kafka does: closing is the only way the client hears of it."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.info("closing %s: request without response failed: %s", conn.peer, exc)
        conn.abort()
