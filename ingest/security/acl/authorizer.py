"""The authorizer: decides from the ACL bindings, as Kafka's StandardAuthorizer.

Rules, in order:

1. A super user may do everything.
2. A DENY binding that applies to the resource, the principal (or ``User:*``)
   and the host (or ``*``), for the operation or ALL, denies: deny wins.
3. An ALLOW binding that applies likewise, for the operation, ALL, or an
   operation that implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE,
   ALTER_CONFIGS implies DESCRIBE_CONFIGS), allows.
4. When no binding at all applies to the resource, the answer is
   ``allow_everyone_if_no_acl_found`` (false by default); else deny.

The bindings are cached in memory; :meth:`Authorizer.refresh` reloads them
when the store's version moved, and :meth:`Authorizer.run` does so every
``refresh_interval_s`` (other brokers' changes become visible within it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable

from ingest.security.acl.model import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
    implied_by,
)
from ingest.security.acl.store import AclStore

__all__ = ["Authorizer"]

log = logging.getLogger(__name__)
_MAX_DECISIONS = 100_000


class Authorizer:
    def __init__(
        self,
        store: AclStore,
        super_users: Iterable[str] = (),
        *,
        allow_everyone_if_no_acl_found: bool = False,
        refresh_interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.Lock()
        self._version: int | None = None
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        # decisions of the current bindings (cleared on reload): hot paths
        # (Produce, Fetch) ask the same question for every request
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    # --- cache ------------------------------------------------------------------
    def refresh(self) -> bool:
        """Reload the bindings when the store changed (blocking); True when reloaded."""
        version = self.store.version()
        if version == self._version:
            return False
        bindings = self.store.list()
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in bindings:
            by_type.setdefault(b.resource_type, []).append(b)
        with self._lock:
            self._by_type = {k: tuple(v) for k, v in by_type.items()}
            self._decisions = {}
            self._version = version
        return True

    async def run(self) -> None:
        """Refresh every ``refresh_interval_s`` until cancelled."""
        while True:
            try:
                await asyncio.to_thread(self.refresh)
            except Exception:  # a store outage keeps the last bindings
                log.warning("cannot refresh ACLs; keeping the cached ones", exc_info=True)
            await asyncio.sleep(self.refresh_interval_s)

    # --- decisions --------------------------------------------------------------
    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        if self._version is None:
            self.refresh()
        if resource_type is ResourceType.CLUSTER:
            name = CLUSTER_NAME
        key = (principal, host, operation, resource_type, name)
        with self._lock:
            known = self._decisions.get(key)
            candidates = self._by_type.get(resource_type, ())
            decisions = self._decisions
        if known is not None:
            return known
        allowed = self._decide(principal, host, operation, resource_type, name, candidates)
        if len(decisions) >= _MAX_DECISIONS:
            decisions.clear()
        decisions[key] = allowed  # into the map of the bindings it was decided on
        return allowed

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        candidates: tuple[AclBinding, ...],
    ) -> bool:
        applicable = [b for b in candidates if b.applies(resource_type, name)]
        if not applicable:
            return self.allow_everyone_if_no_acl_found
        mine = [
            b
            for b in applicable
            if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)
        ]
        if any(
            b.permission is AclPermissionType.DENY and b.operation in (operation, AclOperation.ALL)
            for b in mine
        ):
            return False
        granting = implied_by(operation)
        return any(
            b.permission is AclPermissionType.ALLOW and b.operation in granting for b in mine
        )

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        operations: Iterable[AclOperation],
    ) -> frozenset[AclOperation]:
        """Those of ``operations`` the principal may perform on the resource."""
        return frozenset(
            op for op in operations if self.authorize(principal, host, op, resource_type, name)
        )

    def may_on_some(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type grants ``operation`` to the
        principal (Kafka's authorizeByResourceType, simplified): an ALLOW
        binding for it that no DENY on every name (literal ``*``) cancels."""
        if principal in self.super_users:
            return True
        if self._version is None:
            self.refresh()
        with self._lock:
            candidates = self._by_type.get(resource_type, ())
        mine = [
            b
            for b in candidates
            if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)
        ]
        denied_everywhere = any(
            b.permission is AclPermissionType.DENY
            and b.operation in (operation, AclOperation.ALL)
            and b.resource_name == WILDCARD
            for b in mine
        )
        if denied_everywhere:
            return False
        granting = implied_by(operation)
        return any(
            b.permission is AclPermissionType.ALLOW and b.operation in granting for b in mine
        )
