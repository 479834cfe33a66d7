"""Zero cross-AZ produce: rack-routed Produce through object storage.

A producer announces its rack in ``client.id`` (``tidelake_rack=<rack>``);
Metadata names a broker of its rack as each partition's leader
(:func:`routed_leader`); that broker, when it does not lead the partition,
writes the batches to a router object in the shared object store and has the
leader append them from there (:mod:`.proxy`, :mod:`.leader`). Payload bytes
cross racks only through object storage.
"""

from ingest.zone_router.leader import is_routed, serve
from ingest.zone_router.proxy import ZoneRouter, close_router, routed_produce, router_of
from ingest.zone_router.routing import (
    client_rack,
    leader_for_client,
    routed_leader,
    routed_leaders,
)

__all__ = [
    "ZoneRouter",
    "client_rack",
    "close_router",
    "is_routed",
    "leader_for_client",
    "routed_leader",
    "routed_leaders",
    "routed_produce",
    "router_of",
    "serve",
]
