"""Decoding and checking namespaces, table names and page tokens."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from catalog.rest.errors import IcebergHTTPError

__all__ = ["Page", "check_namespace", "check_table_name", "decode_namespace", "paginate"]

UNIT_SEPARATOR = "\x1f"
# Names become parts of file locations (warehouse/ns/table/...): characters that
# URIs or paths would read differently are refused.
_FORBIDDEN = frozenset("/\\?#%")
T = TypeVar("T")


def _bad(message: str) -> IcebergHTTPError:
    return IcebergHTTPError(400, "BadRequestException", message)


def check_namespace(levels: Sequence[Any]) -> tuple[str, ...]:
    """A namespace as a tuple of levels; every level a non-empty plain string."""
    if not isinstance(levels, list | tuple) or not levels:
        raise _bad("Invalid namespace: expected a non-empty list of levels")
    out = []
    for level in levels:
        if not isinstance(level, str) or not level:
            raise _bad(f"Invalid namespace {list(levels)!r}: levels must be non-empty strings")
        if "." in level or _unsafe(level):
            raise _bad(
                f"Invalid namespace level {level!r}: '.', '/', '\\', '?', '#', '%' and "
                "control characters are not allowed"
            )
        out.append(level)
    return tuple(out)


def decode_namespace(raw: str, *, query: bool = False) -> tuple[str, ...]:
    """A namespace parameter: levels joined by the unit separator (0x1F).

    ``query``: the ``parent`` query parameter, which some clients (pyiceberg)
    percent-encode twice; since '%' is never part of a valid name, a '%' left
    after the first decoding is decoded once more.
    """
    if not raw:
        raise _bad("Invalid namespace: empty")
    if query and "%" in raw:
        raw = unquote(raw)
    return check_namespace(raw.split(UNIT_SEPARATOR))


def check_table_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise _bad("Invalid table name: must be a non-empty string")
    if _unsafe(name):
        raise _bad(
            f"Invalid table name {name!r}: '/', '\\', '?', '#', '%' and control characters "
            "are not allowed"
        )
    return name


def _unsafe(name: str) -> bool:
    return any(ord(c) < 0x20 or c in _FORBIDDEN for c in name)


class Page:
    """One page of a listing and the token for the next, if any."""

    def __init__(self, items: list[Any], next_token: str | None) -> None:
        self.items = items
        self.next_token = next_token


def _encode_token(key: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def _decode_token(token: str) -> list[str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise _bad(f"Invalid page token: {token!r}") from exc
    if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
        raise _bad(f"Invalid page token: {token!r}")
    return key


def paginate(items: list[tuple[str, ...]], page_token: str | None, page_size: int | None) -> Page:
    """Keyset pagination over identifiers sorted by their levels.

    Without ``pageToken`` and ``pageSize`` everything is returned. A page token
    names the last identifier returned, so listings stay stable when entries
    are added or removed between pages.
    """
    if page_size is not None and page_size < 1:
        raise _bad(f"Invalid pageSize {page_size}: must be at least 1")
    ordered = sorted(items)
    if page_token:
        after = tuple(_decode_token(page_token))
        ordered = [i for i in ordered if i > after]
    if page_size is None or len(ordered) <= page_size:
        return Page(ordered, None)
    page = ordered[:page_size]
    return Page(page, _encode_token(list(page[-1])))
