"""Per-namespace permissions of OAuth2 clients on the REST catalog.

A client's grants are ``read`` / ``write`` (``write`` includes ``read``),
each for every namespace or for the namespaces under a dotted prefix:
``"read"``, ``"write:sales"`` (``sales`` and everything below it, such as
``sales.eu``), ``"write:team_*"`` (any namespace whose dotted name starts
with ``team_``). A client without an entry in a non-empty table may do
nothing; an empty table (or a static token) allows everything.

Pure rules, no I/O: the router asks :meth:`NamespaceGrants.allows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["CatalogAccess", "NamespaceGrants"]


class CatalogAccess(IntEnum):
    READ = 1
    WRITE = 2


@dataclass(frozen=True, slots=True)
class _Grant:
    access: CatalogAccess
    pattern: str  # dotted namespace; "" = every namespace
    prefix: bool  # pattern ended with "*": a plain string prefix

    def covers(self, namespace: tuple[str, ...] | None) -> bool:
        if not self.pattern:
            return True
        if namespace is None:
            return False
        dotted = ".".join(namespace)
        if self.prefix:
            return dotted.startswith(self.pattern)
        return dotted == self.pattern or dotted.startswith(self.pattern + ".")


def _parse(text: str) -> _Grant:
    name, sep, pattern = text.strip().partition(":")
    try:
        access = CatalogAccess[name.strip().upper()]
    except KeyError:
        raise ValueError(f"grant {text!r}: expected read or write") from None
    pattern = pattern.strip()
    if sep and not pattern:
        raise ValueError(f"grant {text!r}: empty namespace after ':'")
    prefix = pattern.endswith("*")
    return _Grant(access, pattern.rstrip("*"), prefix and bool(pattern.rstrip("*")))


class NamespaceGrants:
    def __init__(self, table: Mapping[str, Iterable[str]] | None = None) -> None:
        self._table = {c: tuple(_parse(g) for g in gs) for c, gs in (table or {}).items()}

    @property
    def enforced(self) -> bool:
        return bool(self._table)

    def allows(
        self, client: str | None, access: CatalogAccess, namespace: tuple[str, ...] | None
    ) -> bool:
        """``client`` None: a static token or no authentication (allowed).
        ``namespace`` None: a request about no namespace in particular (the
        config, the namespace list: any grant; a rename or a multi-table
        commit with WRITE: a grant over every namespace)."""
        if client is None or not self._table:
            return True
        grants = self._table.get(client, ())
        if namespace is None and access is CatalogAccess.READ:
            return bool(grants)
        return any(g.access >= access and g.covers(namespace) for g in grants)
