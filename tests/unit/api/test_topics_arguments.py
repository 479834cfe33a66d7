"""`tidelake topics` takes the broker address before or after the action, as
Kafka's own tools do."""

from __future__ import annotations

import pytest

from api.cli import build_parser


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "-b", "127.0.0.1:19091", "create", "clicks", "--partitions", "6"],
        [
            "topics",
            "create",
            "clicks",
            "--partitions",
            "6",
            "--bootstrap-server",
            "127.0.0.1:19091",
        ],
        ["topics", "list", "-b", "127.0.0.1:19091"],
        ["topics", "describe", "clicks", "--bootstrap-server", "127.0.0.1:19091"],
    ],
)
def test_bootstrap_server_before_or_after_the_action(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.bootstrap_server == "127.0.0.1:19091"


def test_no_bootstrap_server_leaves_it_to_the_settings() -> None:
    args = build_parser().parse_args(["topics", "list"])
    assert args.bootstrap_server is None
