"""``Idempotency-Key`` support for the REST catalog's mutation endpoints.

A request carrying a key that was already finalized gets the first request's
response again without running the operation twice. Finalized: 2xx and 4xx
answers (5xx ones are not stored). Keys live in memory for
``IDEMPOTENCY_KEY_LIFETIME`` (advertised in ``GET /v1/config``); a restart
forgets them, which the spec allows for clients that retry within one process
lifetime of the server.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response

from catalog.rest.errors import IcebergErrorRoute, error_response

__all__ = ["IDEMPOTENCY_KEY_LIFETIME", "IdempotencyStore", "idempotent_route_class"]

IDEMPOTENCY_KEY_LIFETIME = "PT30M"
_LIFETIME_S = 30 * 60
_KEY = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MUTATIONS = frozenset({"POST", "DELETE"})


class IdempotencyStore:
    """Finalized responses by key, bounded in number and age."""

    def __init__(self, max_entries: int = 10_000, lifetime_s: float = _LIFETIME_S) -> None:
        self._entries: OrderedDict[str, tuple[float, str, int, bytes, dict[str, str]]] = (
            OrderedDict()
        )
        # Only touched from the event loop thread, so no further locking.
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._max = max_entries
        self._lifetime = lifetime_s

    def acquire(self, key: str) -> asyncio.Lock:
        """The lock that serializes requests with ``key``; pair with :meth:`release`."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        return lock

    def release(self, key: str) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)

    def get(self, key: str) -> tuple[str, int, bytes, dict[str, str]] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if time.monotonic() - entry[0] > self._lifetime:
            del self._entries[key]
            return None
        return entry[1:]

    def put(self, key: str, operation: str, response: Response) -> None:
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        self._entries[key] = (
            time.monotonic(),
            operation,
            response.status_code,
            bytes(response.body),
            headers,
        )
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class IdempotentRoute(IcebergErrorRoute):
    """Replays finalized answers for mutation requests that carry an ``Idempotency-Key``."""

    store: IdempotencyStore  # set on a subclass per router

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        store = self.store

        async def replaying(request: Request) -> Response:
            key = request.headers.get("idempotency-key")
            if key is None or request.method not in _MUTATIONS:
                return await handler(request)
            if not _KEY.match(key):
                return error_response(400, "BadRequestException", "Idempotency-Key must be a UUID")
            operation = f"{request.method} {request.url.path}"
            lock = store.acquire(key)
            try:
                async with lock:
                    stored = store.get(key)
                    if stored is not None:
                        stored_op, status, body, headers = stored
                        if stored_op != operation:
                            return error_response(
                                422,
                                "UnprocessableEntityException",
                                f"Idempotency-Key was used for another operation: {stored_op}",
                            )
                        return Response(content=body, status_code=status, headers=headers)
                    response = await handler(request)
                    if response.status_code < 500:
                        store.put(key, operation, response)
                    return response
            finally:
                store.release(key)

        return replaying


def idempotent_route_class(store: IdempotencyStore) -> type[IdempotentRoute]:
    """A route class bound to ``store``."""
    return type("BoundIdempotentRoute", (IdempotentRoute,), {"store": store})
