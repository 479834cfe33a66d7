"""Decoding and checking namespaces, table names and page tokens."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import unquote, unquote_plus

from catalog.rest.errors import IcebergHTTPError

__all__ = [
    "Page",
    "check_namespace",
    "check_table_name",
    "decode_namespace",
    "double_encodes_parent",
    "paginate",
    "path_names",
]

UNIT_SEPARATOR = "\x1f"
# Names become parts of file locations (warehouse/ns/table/...): characters that
# paths would read differently are refused. '%' is kept in namespace levels
# (the spec allows it and file locations carry it unchanged); table names still
# refuse it, as they always did.
_FORBIDDEN_IN_NAMESPACES = frozenset("/\\?#")
_FORBIDDEN_IN_TABLES = frozenset("/\\?#%")
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
        if "." in level or _unsafe(level, _FORBIDDEN_IN_NAMESPACES):
            raise _bad(
                f"Invalid namespace level {level!r}: '.', '/', '\\', '?', '#' and "
                "control characters are not allowed"
            )
        out.append(level)
    return tuple(out)


def decode_namespace(raw: str, *, levels_quoted: bool = False) -> tuple[str, ...]:
    """A namespace parameter, already URL-decoded once: levels joined by 0x1F.

    ``levels_quoted``: every level is still percent-encoded on its own, as
    pyiceberg (up to at least 0.12) sends the ``parent`` query parameter (it
    quotes each level and its HTTP library encodes the whole value again).
    The spec's encoding is the single one, and a '%' may be part of a name, so
    the second decoding is only done for such clients.
    """
    if not raw:
        raise _bad("Invalid namespace: empty")
    levels = raw.split(UNIT_SEPARATOR)
    if levels_quoted:
        levels = [unquote(level) for level in levels]
    return check_namespace(levels)


def path_names(template: str, raw_path: bytes, decoded: dict[str, Any]) -> dict[str, str]:
    """Path parameters decoded as Iceberg clients encode them: form-style, '+' is a space.

    Iceberg's Java client encodes namespace and table names with
    ``URLEncoder`` (a space becomes '+'), pyiceberg with ``quote`` (a space is
    %20, a '+' is %2B); decoding the raw segment with form rules reads both.
    The web framework's own decoding cannot: it has already turned %2B into
    '+'. ``template`` is the route's path; segments are matched from the end,
    so a mount prefix does not matter.
    """
    names = {k: str(v) for k, v in decoded.items()}
    parts = template.strip("/").split("/")
    raw = raw_path.decode("utf-8", "replace").strip("/").split("/")
    if len(raw) < len(parts):
        return names
    for part, segment in zip(parts, raw[len(raw) - len(parts) :], strict=True):
        if part.startswith("{") and part.endswith("}") and part[1:-1] in names:
            names[part[1:-1]] = unquote_plus(segment)
    return names


def double_encodes_parent(user_agent: str | None) -> bool:
    """Whether a client percent-encodes the levels of ``parent`` before its HTTP library does."""
    return user_agent is not None and user_agent.startswith("PyIceberg/")


def check_table_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise _bad("Invalid table name: must be a non-empty string")
    if _unsafe(name, _FORBIDDEN_IN_TABLES):
        raise _bad(
            f"Invalid table name {name!r}: '/', '\\', '?', '#', '%' and control characters "
            "are not allowed"
        )
    return name


def _unsafe(name: str, forbidden: frozenset[str]) -> bool:
    return any(ord(c) < 0x20 or c in forbidden for c in name)


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
