"""One module per Kafka API, registered here in one table keyed by API key."""

from __future__ import annotations

from functools import cache

from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from ingest.handlers.base import ApiSpec, RequestContext

__all__ = ["api_table", "ApiSpec", "RequestContext"]


def _spec(key: int, lo: int, hi: int, handler: object, **kw: object) -> ApiSpec:
    # Advertise only versions kio can both parse and build.
    versions = schema_name_map[api_key_map[key]]
    have = [
        v
        for v in range(lo, hi + 1)
        if v in versions
        and EntityType.request in versions[v]
        and EntityType.response in versions[v]
    ]
    return ApiSpec(key, api_key_map[key], min(have), max(have), handler, **kw)  # type: ignore[arg-type]


@cache
def api_table() -> dict[int, ApiSpec]:
    from ingest.handlers import (
        acls,
        add_offsets_to_txn,
        add_partitions_to_txn,
        admin_configs,
        api_versions,
        client_quotas,
        consumer_group_describe,
        consumer_group_heartbeat,
        create_partitions,
        create_topics,
        delete_records,
        delete_topics,
        describe_cluster,
        describe_log_dirs,
        describe_producers,
        describe_transactions,
        end_txn,
        envelope,
        fetch,
        find_coordinator,
        groups,
        init_producer_id,
        list_offsets,
        list_transactions,
        metadata,
        offset_for_leader_epoch,
        offsets,
        partition_reassignments,
        produce,
        sasl_authenticate,
        sasl_handshake,
        scram_credentials,
        txn_offset_commit,
        write_txn_markers,
    )

    specs = [
        _spec(0, 3, 11, produce.handle, no_response=produce.no_response, eager=produce.eager),
        _spec(1, 4, 12, fetch.handle),
        _spec(2, 1, 8, list_offsets.handle),
        _spec(3, 0, 12, metadata.handle),
        _spec(8, 2, 9, offsets.handle_commit),
        _spec(9, 1, 9, offsets.handle_fetch),
        _spec(10, 0, 4, find_coordinator.handle),
        _spec(11, 0, 9, groups.handle_join),
        _spec(12, 0, 4, groups.handle_heartbeat),
        _spec(13, 0, 5, groups.handle_leave),
        _spec(14, 0, 5, groups.handle_sync),
        _spec(15, 0, 5, groups.handle_describe),
        _spec(16, 0, 5, groups.handle_list),
        _spec(17, 0, 1, sasl_handshake.handle),
        _spec(18, 0, 4, api_versions.handle),
        _spec(19, 2, 7, create_topics.handle),
        _spec(20, 1, 6, delete_topics.handle),
        _spec(21, 0, 2, delete_records.handle),
        _spec(22, 0, 4, init_producer_id.handle),
        _spec(23, 2, 4, offset_for_leader_epoch.handle),
        _spec(24, 0, 4, add_partitions_to_txn.handle),
        _spec(25, 0, 3, add_offsets_to_txn.handle),
        _spec(26, 0, 4, end_txn.handle),
        _spec(27, 1, 1, write_txn_markers.handle),
        _spec(28, 0, 4, txn_offset_commit.handle),
        _spec(29, 1, 3, acls.handle_describe),
        _spec(30, 1, 3, acls.handle_create),
        _spec(31, 1, 3, acls.handle_delete),
        _spec(32, 1, 4, admin_configs.handle_describe),
        _spec(33, 0, 2, admin_configs.handle_alter),
        _spec(35, 1, 4, describe_log_dirs.handle),
        _spec(36, 0, 2, sasl_authenticate.handle),
        _spec(37, 0, 3, create_partitions.handle),
        _spec(42, 0, 2, groups.handle_delete),
        _spec(44, 0, 1, admin_configs.handle_incremental_alter),
        _spec(45, 0, 1, partition_reassignments.handle_alter),
        _spec(46, 0, 0, partition_reassignments.handle_list),
        _spec(48, 0, 1, client_quotas.handle_describe),
        _spec(49, 0, 1, client_quotas.handle_alter),
        _spec(50, 0, 0, scram_credentials.handle_describe),
        _spec(51, 0, 0, scram_credentials.handle_alter),
        _spec(58, 0, 0, envelope.handle, internal=True),  # between brokers: routed produce
        _spec(60, 0, 1, describe_cluster.handle),
        _spec(61, 0, 0, describe_producers.handle),
        _spec(65, 0, 0, describe_transactions.handle),
        _spec(66, 0, 2, list_transactions.handle),
        _spec(68, 0, 1, consumer_group_heartbeat.handle),
        _spec(69, 0, 1, consumer_group_describe.handle),
    ]
    return {s.key: s for s in specs}
