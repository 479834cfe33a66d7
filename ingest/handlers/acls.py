"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31).

As Kafka's broker: without an authorizer every answer is SECURITY_DISABLED;
describing needs DESCRIBE on the cluster, creating and deleting ALTER, else
CLUSTER_AUTHORIZATION_FAILED; a binding or filter Kafka cannot use gets
INVALID_REQUEST (per creation / filter, or at the top for DescribeAcls).
A change is seen by this broker's authorizer before the response is sent
and by the other brokers of a cluster within their refresh interval.
Built as version 3 entities; the dispatcher narrows them for older clients.
"""

from __future__ import annotations

import asyncio
import datetime
from itertools import groupby
from typing import Union

from kio.schema.create_acls import v1 as create_v1
from kio.schema.create_acls import v2 as create_v2
from kio.schema.create_acls import v3 as create_v3
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.delete_acls import v1 as delete_v1
from kio.schema.delete_acls import v2 as delete_v2
from kio.schema.delete_acls import v3 as delete_v3
from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.schema.describe_acls import v1 as describe_v1
from kio.schema.describe_acls import v2 as describe_v2
from kio.schema.describe_acls import v3 as describe_v3
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.static.primitive import i8, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce
from ingest.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    binding_from_codes,
)

__all__ = ["handle_create", "handle_delete", "handle_describe"]

CreateAclsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    create_v1.CreateAclsRequest, create_v2.CreateAclsRequest, create_v3.CreateAclsRequest
]
DescribeAclsRequest = Union[  # noqa: UP007
    describe_v1.DescribeAclsRequest,
    describe_v2.DescribeAclsRequest,
    describe_v3.DescribeAclsRequest,
]
DeleteAclsRequest = Union[  # noqa: UP007
    delete_v1.DeleteAclsRequest, delete_v2.DeleteAclsRequest, delete_v3.DeleteAclsRequest
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why the caller may not run this ACL API, or None when it may."""
    if not enforce.enabled(ctx):
        return ErrorCode.security_disabled, "no authorizer is configured on this broker"
    if not enforce.authorize_cluster(ctx, operation):
        return (
            ErrorCode.cluster_authorization_failed,
            f"{enforce.principal(ctx)} may not {operation.name} the cluster's ACLs",
        )
    return None


def _filter_of(
    resource_type: int,
    resource_name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclBindingFilter:
    try:
        selector = AclBindingFilter(
            ResourceType(resource_type),
            resource_name,
            PatternType(pattern_type),
            principal,
            host,
            AclOperation(operation),
            AclPermissionType(permission),
        )
    except ValueError:
        raise InvalidAcl("the filter has an unknown code") from None
    selector.validate()
    return selector


async def _changed(ctx: RequestContext) -> None:
    authorizer = ctx.broker.authorizer
    if authorizer is not None:
        await asyncio.to_thread(authorizer.refresh)


async def handle_create(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    refusal = _refusal(ctx, AclOperation.ALTER)
    results: list[AclCreationResult] = []
    added = False
    for c in request.creations:
        code, message = refusal or (ErrorCode.none, None)
        if refusal is None:
            try:
                binding = binding_from_codes(
                    c.resource_type,
                    c.resource_name,
                    getattr(c, "resource_pattern_type", PatternType.LITERAL),
                    c.principal,
                    c.host,
                    c.operation,
                    c.permission_type,
                )
                binding.validate()
                added |= await asyncio.to_thread(ctx.broker.acls.add, binding)
            except InvalidAcl as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        results.append(AclCreationResult(error_code=code, error_message=message))
    if added:
        await _changed(ctx)
    return CreateAclsResponse(throttle_time=_NO_THROTTLE, results=tuple(results))


async def handle_describe(
    ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    refusal = _refusal(ctx, AclOperation.DESCRIBE)
    if refusal is None:
        try:
            selector = _filter_of(
                request.resource_type_filter,
                request.resource_name_filter,
                getattr(request, "pattern_type_filter", PatternType.LITERAL),
                request.principal_filter,
                request.host_filter,
                request.operation,
                request.permission_type,
            )
        except InvalidAcl as exc:
            refusal = ErrorCode.invalid_request, str(exc)
    if refusal is not None:
        code, message = refusal
        return DescribeAclsResponse(
            throttle_time=_NO_THROTTLE, error_code=code, error_message=message, resources=()
        )
    bindings = await asyncio.to_thread(ctx.broker.acls.list, selector)
    resources = tuple(
        DescribeAclsResource(
            resource_type=i8(kind),
            resource_name=name,
            pattern_type=i8(pattern),
            acls=tuple(
                AclDescription(
                    principal=b.principal,
                    host=b.host,
                    operation=i8(b.operation),
                    permission_type=i8(b.permission),
                )
                for b in group
            ),
        )
        for (kind, name, pattern), group in groupby(bindings, _resource_key)
    )
    return DescribeAclsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources,
    )


def _resource_key(b: AclBinding) -> tuple[int, str, int]:
    return int(b.resource_type), b.resource_name, int(b.pattern_type)


def _matching(b: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=i8(b.resource_type),
        resource_name=b.resource_name,
        pattern_type=i8(b.pattern_type),
        principal=b.principal,
        host=b.host,
        operation=i8(b.operation),
        permission_type=i8(b.permission),
    )


async def handle_delete(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    refusal = _refusal(ctx, AclOperation.ALTER)
    results: list[DeleteAclsFilterResult] = []
    removed = False
    for f in request.filters:
        code, message = refusal or (ErrorCode.none, None)
        gone: list[AclBinding] = []
        if refusal is None:
            try:
                selector = _filter_of(
                    f.resource_type_filter,
                    f.resource_name_filter,
                    getattr(f, "pattern_type_filter", PatternType.LITERAL),
                    f.principal_filter,
                    f.host_filter,
                    f.operation,
                    f.permission_type,
                )
                gone = await asyncio.to_thread(ctx.broker.acls.remove, selector)
                removed |= bool(gone)
            except InvalidAcl as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        results.append(
            DeleteAclsFilterResult(
                error_code=code,
                error_message=message,
                matching_acls=tuple(_matching(b) for b in gone),
            )
        )
    if removed:
        await _changed(ctx)
    return DeleteAclsResponse(throttle_time=_NO_THROTTLE, filter_results=tuple(results))
