"""The consumer group protocol of KIP-848: server-side assignment, member
epochs and reconciliation (no networking, no wire codec)."""

from ingest.group.consumer.coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from ingest.group.consumer.group import ConsumerGroup, ConsumerMember, Heartbeat, HeartbeatResult

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerMember",
    "Heartbeat",
    "HeartbeatResult",
]
