"""Headless Chromium for the tests that load a page: its DOM after the page's
scripts ran (Debian's chromium, installed by scripts/dev.sh install)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

__all__ = ["dump_dom"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"


def dump_dom(url: str, *extra_flags: str) -> str:
    """The DOM of ``url`` once its scripts ran (up to 10 s of virtual time)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                *extra_flags,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        ).stdout
