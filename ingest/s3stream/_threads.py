"""A private thread pool for blocking calls (metadata store, files, encoding).

The engine's blocking work runs here rather than on the event loop's default
executor, which other parts of the process share: a busy neighbour cannot
stall uploads, commits or object reads, and the engine cannot starve it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["ThreadRunner"]

P = ParamSpec("P")
T = TypeVar("T")


class ThreadRunner:
    def __init__(self, workers: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False)
