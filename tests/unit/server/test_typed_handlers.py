"""Every handler takes kio's typed request entities and returns a typed kio
response entity (never a mapping), so mypy checks every field it fills in."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from ingest.handlers import ApiSpec, api_table
from ingest.protocol.codec import request_class


def _members(hint: object) -> list[object]:
    args = typing.get_args(hint)
    return [m for a in args for m in _members(a)] if args else [hint]


@pytest.mark.parametrize("spec", api_table().values(), ids=lambda s: s.name)
def test_the_handler_takes_every_served_request_version_and_returns_an_entity(
    spec: ApiSpec,
) -> None:
    hints = typing.get_type_hints(spec.handler)
    requests = set(_members(hints["request"]))
    for version in range(spec.min_version, spec.max_version + 1):
        assert request_class(spec.key, version) in requests, (spec.name, version)
    responses = [r for r in _members(hints["return"]) if r is not type(None)]
    assert responses, spec.name
    for r in responses:
        assert isinstance(r, type) and dataclasses.is_dataclass(r), (spec.name, r)
        assert getattr(r, "__api_key__", None) == spec.key, (spec.name, r)
