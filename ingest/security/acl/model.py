"""ACL bindings and filters, as Apache Kafka defines them (wire codes kept).

A binding says: ``principal`` from ``host`` is allowed (or denied)
``operation`` on the resources that ``pattern`` matches. A pattern is a
resource type, a name and a pattern type: LITERAL matches the name itself
(``*`` as a literal name matches every name), PREFIXED every name that
starts with it (KIP-290). Filters select bindings (DescribeAcls,
DeleteAcls): ``None`` fields and the ANY codes match everything, and the
MATCH pattern type selects every binding that would apply to one resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CLUSTER_NAME",
    "InvalidAcl",
    "PatternType",
    "ResourceType",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "implied_by",
    "pattern_matches",
]

WILDCARD = "*"  # a literal name or host that matches every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name a cluster ACL may have


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAcl(ValueError):
    """A binding or filter that cannot be stored or used (INVALID_REQUEST)."""


def implied_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW grants ``operation`` (itself and ALL
    included): DESCRIBE comes with READ, WRITE, DELETE and ALTER;
    DESCRIBE_CONFIGS with ALTER_CONFIGS. A DENY denies only its own
    operation (and ALL every operation)."""
    extra: tuple[AclOperation, ...] = ()
    if operation is AclOperation.DESCRIBE:
        extra = (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER)
    elif operation is AclOperation.DESCRIBE_CONFIGS:
        extra = (AclOperation.ALTER_CONFIGS,)
    return frozenset((operation, AclOperation.ALL, *extra))


def pattern_matches(pattern_type: PatternType, pattern_name: str, name: str) -> bool:
    """Whether a stored pattern (LITERAL or PREFIXED) applies to resource ``name``."""
    if pattern_type is PatternType.LITERAL:
        return pattern_name == name or pattern_name == WILDCARD
    if pattern_type is PatternType.PREFIXED:
        return name.startswith(pattern_name)
    return False


def _principal_ok(principal: str) -> bool:
    kind, sep, name = principal.partition(":")
    return bool(sep and kind and name)


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", or "User:*" for every user
    host: str  # an address, or "*" for every host
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Raise :class:`InvalidAcl` unless the binding may be stored."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"resource type {self.resource_type.name} is not a resource")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"pattern type {self.pattern_type.name}: only LITERAL or PREFIXED")
        if not self.resource_name:
            raise InvalidAcl("the resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and (
            self.pattern_type is not PatternType.LITERAL or self.resource_name != CLUSTER_NAME
        ):
            raise InvalidAcl(f"a cluster ACL names the literal resource {CLUSTER_NAME!r}")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl(f"operation {self.operation.name} is not an operation")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"permission {self.permission.name}: only ALLOW or DENY")
        if not _principal_ok(self.principal):
            raise InvalidAcl(f"principal {self.principal!r} is not TYPE:NAME")
        if not self.host:
            raise InvalidAcl("the host must not be empty (use * for every host)")

    def applies(self, resource_type: ResourceType, name: str) -> bool:
        return self.resource_type is resource_type and pattern_matches(
            self.pattern_type, self.resource_name, name
        )


def _enum(cls: type[IntEnum], code: int, what: str) -> IntEnum:
    try:
        return cls(code)
    except ValueError:
        raise InvalidAcl(f"unknown {what} code {code}") from None


def binding_from_codes(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A binding from wire codes; :class:`InvalidAcl` for codes Kafka does not know."""
    return AclBinding(
        ResourceType(_enum(ResourceType, resource_type, "resource type")),
        resource_name,
        PatternType(_enum(PatternType, pattern_type, "pattern type")),
        principal,
        host,
        AclOperation(_enum(AclOperation, operation, "operation")),
        AclPermissionType(_enum(AclPermissionType, permission, "permission type")),
    )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings; ``None`` and the ANY codes match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        """Raise :class:`InvalidAcl` for a filter Kafka refuses (UNKNOWN codes,
        MATCH without a name is allowed and matches every pattern)."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value.name == "UNKNOWN":
                raise InvalidAcl(f"the filter has an UNKNOWN {type(value).__name__}")

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and binding.resource_type is not (
            self.resource_type
        ):
            return False
        if not self._pattern_matches(binding):
            return False
        if self.principal is not None and binding.principal != self.principal:
            return False
        if self.host is not None and binding.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and binding.operation is not self.operation:
            return False
        return self.permission is AclPermissionType.ANY or binding.permission is self.permission

    def _pattern_matches(self, binding: AclBinding) -> bool:
        kind = self.pattern_type
        if kind is PatternType.MATCH:
            if self.resource_name is None:
                return True
            return pattern_matches(binding.pattern_type, binding.resource_name, self.resource_name)
        if kind is not PatternType.ANY and binding.pattern_type is not kind:
            return False
        return self.resource_name is None or binding.resource_name == self.resource_name
