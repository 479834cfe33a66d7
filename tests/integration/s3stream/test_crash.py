"""kill -9 the engine mid-stream; every acknowledged batch must survive, exactly once, in order."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import open_engine
from ingest.s3stream.objectstore import FileObjectStore
from tests.integration.s3stream.crash_writer import config, count_of, payload_of

WRITER = Path(__file__).with_name("crash_writer.py")
ROOT = Path(__file__).resolve().parents[3]


def _run_and_kill(data: Path, min_acks: int, max_seconds: float) -> dict[int, int]:
    """Run the writer, kill -9 it after ``min_acks`` acks; returns stream -> highest acked index."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    acked: dict[int, int] = {}
    buf = b""
    n = 0
    deadline = time.monotonic() + max_seconds
    try:
        while n < min_acks and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"ACK "):
                    _, sid, j = line.split()
                    acked[int(sid)] = max(acked.get(int(sid), -1), int(j))
                    n += 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # acks already in the pipe were acknowledged before the kill: they count too
    rest = buf + proc.stdout.read()
    for line in rest.split(b"\n"):
        if line.startswith(b"ACK "):
            _, sid, j = line.split()
            acked[int(sid)] = max(acked.get(int(sid), -1), int(j))
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert n >= min(min_acks, 20), f"writer produced {n} acks; stderr:\n{stderr}"
    return acked


async def _verify(data: Path, acked: dict[int, int]) -> None:
    metadata = SqliteMetadataStore(data / "meta.db")
    objects = FileObjectStore(data / "objects")
    engine = open_engine(config(data), metadata, objects)
    await engine.start()
    try:
        for sid, last in acked.items():
            s = await engine.open_stream(sid)
            j, pos = 0, 0
            while pos < s.confirm_offset:
                batches = await s.fetch(pos, s.confirm_offset, 1 << 20)
                assert batches
                for b in batches:
                    assert b.base_offset == pos, (sid, j, b.base_offset, pos)
                    assert b.count == count_of(j)
                    assert bytes(b.payload) == payload_of(sid, j), (sid, j)
                    pos = b.end_offset
                    j += 1
            assert j > last, f"stream {sid}: acked batch {last} lost (only {j} batches)"
    finally:
        await engine.close()
        await objects.close()
        metadata.close()


def test_acknowledged_appends_survive_kill_9(tmp_path: Path) -> None:
    first = _run_and_kill(tmp_path, min_acks=400, max_seconds=15)
    asyncio.run(_verify(tmp_path, first))
    # the writer resumes after recovery; kill it again and check both rounds
    second = _run_and_kill(tmp_path, min_acks=400, max_seconds=15)
    assert all(second[sid] > first[sid] for sid in first)
    asyncio.run(_verify(tmp_path, second))
    assert list((tmp_path / "objects").rglob("*.sso")), "uploads ran during the test"
