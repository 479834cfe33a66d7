"""Start a platform with sample data and write a PNG of each console page.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

Needs Chromium (``bash scripts/dev.sh install``). The platform binds free
127.0.0.1 ports under a temporary data directory and is stopped at the end.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.api.console_data import load_sample_data  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

PAGES = {
    "topics": "/topics",
    "topic-messages": "/topics/orders?partition=0",
    "groups": "/groups",
    "group-lag": "/groups/billing",
    "schemas": "/schemas",
    "schema-diff": "/schemas/orders-value",
    "tables": "/tables",
    "brokers": "/brokers",
}


def shoot(chromium: str, url: str, path: Path) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                "--virtual-time-budget=10000",
                f"--screenshot={path}",
                url,
            ],
            capture_output=True,
            timeout=90,
            check=True,
        )


def traffic(bootstrap: str, stop: threading.Event) -> None:
    """Clicks and orders keep coming while the pages are shot (the charts move)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    i = 0
    while not stop.is_set():
        producer.produce("clicks", key=f"user-{i % 5}".encode(), value=f"click {i}".encode())
        if i % 10 == 0:
            producer.produce("orders", key=f"late-{i}".encode(), value=b"not avro", partition=1)
        i += 1
        producer.poll(0)
        time.sleep(0.01 if (i // 300) % 2 else 0.003)
    producer.flush(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: run `bash scripts/dev.sh install`", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        platform = TidelakeProcess(
            Path(tmp) / "data", env={"TIDELAKE_METRICS_HISTORY_INTERVAL_S": "1"}
        ).start()
        try:
            sample = load_sample_data(platform, orders=40, clicks=400)
            stop = threading.Event()
            producing = threading.Thread(target=traffic, args=(platform.bootstrap, stop))
            producing.start()
            time.sleep(15)  # samples for the charts over time
            try:
                for name, fragment in PAGES.items():
                    path = args.out / f"{name}.png"
                    shoot(chromium, f"{platform.http_url}/ui/#{fragment}", path)
                    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
            finally:
                stop.set()
                producing.join(30)
                sample.close()
        finally:
            platform.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
