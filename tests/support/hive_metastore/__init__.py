"""A real Hive 2.3.9 Metastore for tests, from pyspark's bundled jars.

``hive_metastore(tmp_dir)`` compiles ``TidelakeHiveMetastore.java`` against
``pyspark/jars/*`` (once, cached under the system temp directory), starts it on
127.0.0.1 on a free port with an embedded Derby database in ``tmp_dir`` and
yields ``thrift://127.0.0.1:<port>``. Needs Java 17 (``java``, ``javac``) and
``pyspark``; ``available()`` says whether they are here.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.net import free_port

__all__ = ["available", "hive_metastore"]

_SOURCE = Path(__file__).with_name("TidelakeHiveMetastore.java")


def _pyspark_jars() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    return jars if (jars / "hive-metastore-2.3.9.jar").exists() else None


def available() -> bool:
    return bool(_pyspark_jars() and shutil.which("java") and shutil.which("javac"))


def _compiled(jars: Path) -> Path:
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"tidelake-hms-{digest}"
    if not (out / "TidelakeHiveMetastore.class").exists():
        staging = Path(tempfile.mkdtemp(prefix="tidelake-hms-build-"))
        subprocess.run(
            ["javac", "-d", str(staging), "-cp", f"{jars}/*", str(_SOURCE)],
            check=True,
            capture_output=True,
        )
        try:
            staging.rename(out)
        except OSError:  # another process won the race
            shutil.rmtree(staging, ignore_errors=True)
    return out


@contextmanager
def hive_metastore(state_dir: Path, timeout: float = 90) -> Iterator[str]:
    jars = _pyspark_jars()
    if jars is None:
        raise RuntimeError("pyspark with Hive jars is not installed")
    classes = _compiled(jars)
    port = free_port()
    log_path = state_dir / "metastore.log"
    state_dir.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                "java",
                "-Xmx512m",
                "-cp",
                f"{jars}/*:{classes}",
                "TidelakeHiveMetastore",
                str(port),
                str(state_dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=state_dir,
        )
    try:
        deadline = time.monotonic() + timeout
        while b"METASTORE READY" not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Hive Metastore did not start; see {log_path}")
            time.sleep(0.2)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
