"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49).

Entities are users and/or client ids (named, or the default as a null
name); the quotas are ``producer_byte_rate`` and ``consumer_byte_rate``
(bytes/s), enforced by Produce and Fetch. Describing needs DESCRIBE_CONFIGS
on the cluster, altering ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED); an
unknown entity type, a repeated one, an unsupported key or a value that is
not positive is INVALID_REQUEST. Filters: match type 0 is an exact name, 1
the default, 2 any named entity of the type; ``strict`` leaves out entities
with types the filter does not name. Built as version 1 entities.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Union

from kio.schema.alter_client_quotas import v0 as alter_v0
from kio.schema.alter_client_quotas import v1 as alter_v1
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.alter_client_quotas.v1.response import EntityData as AlteredEntity
from kio.schema.alter_client_quotas.v1.response import EntryData as AlteredEntry
from kio.schema.describe_client_quotas import v0 as describe_v0
from kio.schema.describe_client_quotas import v1 as describe_v1
from kio.schema.describe_client_quotas.v1.response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from kio.static.primitive import f64, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl
from ingest.security.quota import (
    ENTITY_TYPES,
    InvalidQuota,
    QuotaEntity,
    check_values,
)

__all__ = ["handle_alter", "handle_describe"]

DescribeClientQuotasRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    describe_v0.DescribeClientQuotasRequest, describe_v1.DescribeClientQuotasRequest
]
AlterClientQuotasRequest = Union[  # noqa: UP007
    alter_v0.AlterClientQuotasRequest, alter_v1.AlterClientQuotasRequest
]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_EXACT, _DEFAULT, _ANY = 0, 1, 2


def _matches(entity: QuotaEntity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    parts = dict(entity.parts())
    if strict and set(parts) - set(wanted):
        return False
    for kind, (match_type, match) in wanted.items():
        if kind not in parts:
            return False
        name = parts[kind]
        if match_type == _EXACT and name != match:
            return False
        if match_type == _DEFAULT and name is not None:
            return False
        if match_type == _ANY and name is None:
            return False
    return True


def _filter(request: DescribeClientQuotasRequest) -> dict[str, tuple[int, str | None]]:
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in request.components:
        if c.entity_type not in ENTITY_TYPES:
            raise InvalidQuota(f"entity type {c.entity_type!r}: only {list(ENTITY_TYPES)}")
        if c.entity_type in wanted:
            raise InvalidQuota(f"entity type {c.entity_type!r} filtered twice")
        if c.match_type not in (_EXACT, _DEFAULT, _ANY):
            raise InvalidQuota(f"unknown match type {c.match_type}")
        if c.match_type == _EXACT and c.match is None:
            raise InvalidQuota("an exact match needs a name")
        wanted[c.entity_type] = (int(c.match_type), c.match)
    return wanted


async def handle_describe(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    code, message = ErrorCode.none, None
    if not acl.authorize_cluster(ctx, acl.AclOperation.DESCRIBE_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
        message = f"{acl.principal(ctx)} may not describe client quotas"
    else:
        try:
            wanted = _filter(request)
        except InvalidQuota as exc:
            code, message = ErrorCode.invalid_request, str(exc)
    if code != ErrorCode.none:
        return DescribeClientQuotasResponse(
            throttle_time=_NO_THROTTLE, error_code=code, error_message=message, entries=None
        )
    entries = await asyncio.to_thread(ctx.broker.quotas.store.entries)
    found = [
        EntryData(
            entity=tuple(EntityData(entity_type=k, entity_name=n) for k, n in entity.parts()),
            values=tuple(ValueData(key=k, value=f64(v)) for k, v in sorted(values.items())),
        )
        for entity, values in sorted(entries.items(), key=lambda e: e[0].key())
        if _matches(entity, wanted, bool(request.strict))
    ]
    return DescribeClientQuotasResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        entries=tuple(found),
    )


async def handle_alter(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    allowed = acl.authorize_cluster(ctx, acl.AclOperation.ALTER_CONFIGS)
    quotas = ctx.broker.quotas
    results: list[AlteredEntry] = []
    changed = False
    for entry in request.entries:
        code, message = ErrorCode.none, None
        if not allowed:
            code = ErrorCode.cluster_authorization_failed
            message = f"{acl.principal(ctx)} may not alter client quotas"
        else:
            try:
                entity = QuotaEntity.of((e.entity_type, e.entity_name) for e in entry.entity)
                put = {op.key: float(op.value) for op in entry.ops if not op.remove}
                remove = [op.key for op in entry.ops if op.remove]
                check_values(put)
                check_values(dict.fromkeys(remove, 1.0))
                if len({op.key for op in entry.ops}) != len(entry.ops):
                    raise InvalidQuota("a quota key is altered twice")
                if not request.validate_only:
                    await asyncio.to_thread(quotas.store.alter, entity, put, remove)
                    changed = True
            except InvalidQuota as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        results.append(
            AlteredEntry(
                error_code=code,
                error_message=message,
                entity=tuple(
                    AlteredEntity(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
        )
    if changed:
        await asyncio.to_thread(quotas.refresh)
    return AlterClientQuotasResponse(throttle_time=_NO_THROTTLE, entries=tuple(results))
