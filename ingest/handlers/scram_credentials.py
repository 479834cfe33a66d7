"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51).

Both need the connection's principal to be one of ``broker.super_users``
(Kafka checks DESCRIBE / ALTER on the cluster; without ACLs, this broker
grants them to super users only), else CLUSTER_AUTHORIZATION_FAILED. Alter
receives the SaltedPassword a client computed and stores only the keys
derived from it. Errors per user are Kafka's: RESOURCE_NOT_FOUND,
DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM.
"""

from __future__ import annotations

import asyncio
import datetime
from collections import Counter

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.static.primitive import i8, i32, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl
from ingest.security.credentials import CredentialStore, UserCredentialInfo
from ingest.security.scram import credential_from_salted_password

__all__ = ["handle_alter", "handle_describe"]

_MECHANISM_BY_CODE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism
_CODE_BY_MECHANISM = {v: k for k, v in _MECHANISM_BY_CODE.items()}
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _super_user(ctx: RequestContext, operation: acl.AclOperation) -> bool:
    if acl.enabled(ctx):  # DESCRIBE / ALTER on the cluster
        return acl.authorize_cluster(ctx, operation)
    session = ctx.session
    return session is not None and session.principal in ctx.broker.config.super_users


async def handle_describe(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not _super_user(ctx, acl.AclOperation.DESCRIBE):
        denied = "describing SCRAM credentials is for super users"
        if not request.users:  # all users: the error at the top, as Kafka's
            return DescribeUserScramCredentialsResponse(
                throttle_time=_NO_THROTTLE,
                error_code=ErrorCode.cluster_authorization_failed,
                error_message=denied,
                results=(),
            )
        # Named users: the error per user and none at the top (confluent-kafka
        # 2.16 crashes on a top-level error here; Java clients read either).
        return DescribeUserScramCredentialsResponse(
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            results=tuple(
                DescribeUserScramCredentialsResult(
                    user=u.name,
                    error_code=ErrorCode.cluster_authorization_failed,
                    error_message=denied,
                    credential_infos=(),
                )
                for u in request.users
            ),
        )
    infos = await asyncio.to_thread(ctx.broker.credentials.list)
    by_user: dict[str, list[UserCredentialInfo]] = {}
    for info in infos:
        by_user.setdefault(info.user, []).append(info)
    names = [u.name for u in request.users] if request.users else sorted(by_user)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            code, message = ErrorCode.duplicate_resource, f"user {name} named more than once"
        elif name not in by_user:
            code, message = ErrorCode.resource_not_found, f"no SCRAM credential for user {name}"
        else:
            code, message = ErrorCode.none, None
        results.append(
            DescribeUserScramCredentialsResult(
                user=name,
                error_code=code,
                error_message=message,
                credential_infos=tuple(
                    CredentialInfo(
                        mechanism=i8(_CODE_BY_MECHANISM[i.mechanism]), iterations=i32(i.iterations)
                    )
                    for i in (by_user.get(name, []) if code == ErrorCode.none else [])
                ),
            )
        )
    return DescribeUserScramCredentialsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


async def handle_alter(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = list(
        dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    )
    if not _super_user(ctx, acl.AclOperation.ALTER):
        denied = "altering SCRAM credentials is for super users"
        return _alter_response({u: (ErrorCode.cluster_authorization_failed, denied) for u in users})
    outcome = await asyncio.to_thread(_alter, ctx.broker.credentials, request)
    return _alter_response(outcome)


def _alter(
    credentials: CredentialStore, request: AlterUserScramCredentialsRequest
) -> dict[str, tuple[ErrorCode, str | None]]:
    """Validate every change first; a user with any invalid change has none applied."""
    pairs = Counter(
        [(d.name, d.mechanism) for d in request.deletions]
        + [(u.name, u.mechanism) for u in request.upsertions]
    )
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for (name, code), n in pairs.items():
        if name in errors:
            continue
        if not name:
            errors[name] = (ErrorCode.unacceptable_credential, "the user name is empty")
        elif code not in _MECHANISM_BY_CODE:
            errors[name] = (ErrorCode.unsupported_sasl_mechanism, f"unknown SCRAM mechanism {code}")
        elif n > 1:
            errors[name] = (
                ErrorCode.duplicate_resource,
                "a mechanism is altered twice for the user",
            )
    prepared = []
    for u in request.upsertions:
        if u.name in errors:
            continue
        try:
            cred = credential_from_salted_password(
                u.salted_password, u.salt, u.iterations, _MECHANISM_BY_CODE[u.mechanism]
            )
        except ValueError as exc:
            errors[u.name] = (ErrorCode.unacceptable_credential, str(exc))
            continue
        prepared.append((u.name, cred))
    for d in request.deletions:
        if (
            d.name not in errors
            and credentials.get(d.name, _MECHANISM_BY_CODE[d.mechanism]) is None
        ):
            errors[d.name] = (ErrorCode.resource_not_found, "no such credential to delete")
    for d in request.deletions:
        if d.name not in errors:
            credentials.delete(d.name, _MECHANISM_BY_CODE[d.mechanism])
    for name, cred in prepared:
        if name not in errors:
            credentials.put(name, cred)
    users = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    return {u: errors.get(u, (ErrorCode.none, None)) for u in users}


def _alter_response(
    outcome: dict[str, tuple[ErrorCode, str | None]],
) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(
        throttle_time=_NO_THROTTLE,
        results=tuple(
            AlterUserScramCredentialsResult(user=u, error_code=c, error_message=m)
            for u, (c, m) in outcome.items()
        ),
    )
