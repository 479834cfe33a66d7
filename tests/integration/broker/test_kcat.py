"""kcat as a subprocess: metadata, keyed produce and exact consume.

kcat must be installed: these tests fail (they do not skip) without it.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.integration.broker.conftest import create_topic, unique
from tests.support.platform import TidelakeProcess


def _kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> bytes:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed (apt-get install kcat)"
    proc = subprocess.run(
        [exe, "-q", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def test_kcat_metadata_lists_the_broker_and_topics(tidelake: TidelakeProcess) -> None:
    topic = unique("kcat-md")
    create_topic(tidelake.bootstrap, topic, partitions=3)
    md = json.loads(_kcat("-b", tidelake.bootstrap, "-L", "-J"))
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, tidelake.bootstrap)]
    [t] = [t for t in md["topics"] if t["topic"] == topic]
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == 1 for p in t["partitions"])
    text = _kcat("-b", tidelake.bootstrap, "-L", "-t", topic).decode()
    assert f'topic "{topic}" with 3 partitions' in text


def test_kcat_produces_keyed_records_and_consumes_them_back_exactly(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kcat")
    create_topic(tidelake.bootstrap, topic)
    lines = [f"key-{i}:value {i} with spaces, commas; and üñïcode" for i in range(50)]
    lines.append("lonely-key:")  # an empty value
    _kcat(
        "-b",
        tidelake.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K:",
        stdin=("\n".join(lines) + "\n").encode(),
    )
    out = _kcat(
        "-b",
        tidelake.bootstrap,
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-f",
        "%p|%o|%k|%s\\n",
    )
    got = out.decode().splitlines()
    assert got == [f"0|{i}|{line.replace(':', '|', 1)}" for i, line in enumerate(lines)]


def test_kcat_consumes_with_json_envelope(tidelake: TidelakeProcess) -> None:
    topic = unique("kcat-json")
    create_topic(tidelake.bootstrap, topic)
    _kcat("-b", tidelake.bootstrap, "-P", "-t", topic, "-K:", stdin=b"a:1\nb:2\n")
    out = _kcat("-b", tidelake.bootstrap, "-C", "-t", topic, "-e", "-J")
    records = [json.loads(line) for line in out.decode().splitlines()]
    assert [(r["key"], r["payload"], r["offset"]) for r in records] == [
        ("a", "1", 0),
        ("b", "2", 1),
    ]


def test_kcat_headers_round_trip(tidelake: TidelakeProcess) -> None:
    topic = unique("kcat-headers")
    create_topic(tidelake.bootstrap, topic)
    _kcat(
        "-b", tidelake.bootstrap, "-P", "-t", topic, "-H", "trace=abc", "-H", "n=1", stdin=b"x\ny\n"
    )
    out = _kcat("-b", tidelake.bootstrap, "-C", "-t", topic, "-e", "-f", "%o %h %s\\n")
    assert out.decode().splitlines() == ["0 trace=abc,n=1 x", "1 trace=abc,n=1 y"]
