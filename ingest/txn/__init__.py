"""Kafka transactions: the transaction coordinator and its durable state.

``model`` holds a transactional id's record and its states, ``store`` the
``TxnStore`` contract with an in-memory implementation and one on the
broker's metadata store, ``coordinator`` the state machine that the
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions and ListTransactions handlers call. The partitions' side
(control batches, last stable offset, aborted-transaction index) lives with
the partition log in ``ingest.log``; the coordinator reaches it only through
the ``MarkerWriter`` it is given.
"""

from ingest.txn.coordinator import MarkerWriter, OffsetSink, TransactionCoordinator, TxnConfig
from ingest.txn.model import PendingOffset, TxnRecord, TxnState
from ingest.txn.store import MemoryTxnStore, MetadataTxnStore, TxnStore

__all__ = [
    "MarkerWriter",
    "MemoryTxnStore",
    "MetadataTxnStore",
    "OffsetSink",
    "PendingOffset",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnRecord",
    "TxnState",
    "TxnStore",
]
