"""Write a file in bounded steps of writeback, so that a large write does not
sit in the disk's queue ahead of the WAL's small synced writes.

A plain ``write`` of a multi-megabyte object leaves it all dirty in the page
cache; the ``fsync`` after it then sends every byte to the disk at once, and
a file WAL's ``fdatasync`` on the same disk waits behind that burst. Written
in steps, each handed to the disk and waited for (``sync_file_range``) before
the next, an object never has more than one step queued ahead of the WAL.
Measured on a virtual disk (bench/README, session 17): a broker taking 20
MB/s of incompressible records, which writes them to its WAL and again as
objects, answered with a client p99 of 19 ms in 64 KiB steps against 34 ms
unpaced (WAL fdatasync p99 <= 5 against <= 10 ms); the p50 is unchanged. The
price: 8 MiB puts on four threads make 246 MB/s against 335 (one alone: even).

Linux only (``sync_file_range``); elsewhere :func:`write_all` writes in one go.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

__all__ = ["PACED", "write_all"]

# sync_file_range(2) flags
_WAIT_BEFORE = 1
_WRITE = 2
_WAIT_AFTER = 4


def _load() -> Callable[[int, int, int, int], int] | None:
    if not hasattr(os, "O_DIRECT"):  # not Linux
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load()
PACED = _sync_file_range is not None
"""Whether writes here can be paced (``sync_file_range`` is available)."""


def _write(fd: int, view: memoryview) -> None:
    while view:
        n = os.write(fd, view)
        view = view[n:]


def write_all(fd: int, data: bytes | bytearray | memoryview, step: int) -> None:
    """Write ``data`` to ``fd`` from its current position (0), ``step``
    bytes at a time, each step on the disk before the next is written;
    ``step`` 0 (or no ``sync_file_range``) writes it in one go. The caller
    still fsyncs the file: this orders the data's writeback, it does not
    make the file durable (its size and the directory entry are metadata)."""
    view = memoryview(data).cast("B")
    sync = _sync_file_range
    if step <= 0 or sync is None or len(view) <= step:
        _write(fd, view)
        return
    for start in range(0, len(view), step):
        part = view[start : start + step]
        _write(fd, part)
        if sync(fd, start, len(part), _WAIT_BEFORE | _WRITE | _WAIT_AFTER) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sync_file_range: {os.strerror(err)}")
