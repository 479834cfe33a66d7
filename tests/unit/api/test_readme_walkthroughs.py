"""README's walkthroughs run top to bottom as written: no topic is created twice,
and every table they query belongs to a topic they created."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def _shell_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def test_no_walkthrough_creates_a_topic_another_already_created() -> None:
    created = [
        m.group(1)
        for line in _shell_lines()
        if (m := re.search(r"tidelake topics(?: \S+)* create (\S+)", line))
    ]
    assert created, "README has no `tidelake topics create`"
    assert len(created) == len(set(created)), f"created twice: {created}"


def test_tables_queried_are_the_walkthroughs_own_topics() -> None:
    lines = _shell_lines()
    # a topic's table is named as table topics name it: other characters to "_"
    created = {
        re.sub(r"[^A-Za-z0-9_]", "_", m.group(1))
        for line in lines
        if (m := re.search(r"tidelake topics(?: \S+)* create (\S+)", line))
    }
    queried = {
        m.group(1)
        for line in lines
        if "tidelake tables" in line or "tidelake sql" in line
        for m in re.finditer(r"default\.(\w+)", line)
    }
    assert queried <= created
