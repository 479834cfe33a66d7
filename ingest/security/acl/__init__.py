"""ACLs on the Kafka listener: bindings, their stores, the authorizer, and
the per-API rules handlers call (:mod:`ingest.security.acl.enforce`)."""

from __future__ import annotations

from ingest.security.acl.authorizer import Authorizer
from ingest.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)
from ingest.security.acl.store import AclStore, MemoryAclStore, MetadataAclStore

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclStore",
    "Authorizer",
    "InvalidAcl",
    "MemoryAclStore",
    "MetadataAclStore",
    "PatternType",
    "ResourceType",
]
