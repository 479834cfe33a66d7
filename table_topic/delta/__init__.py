"""Table topics as Delta Lake tables (``table.topic.format=delta|both``), with delta-rs.

- ``location``: where Delta tables live (root URI, storage options).
- ``layout``: ``table.topic.partition.by`` as Delta partition columns.
- ``sink``: :class:`DeltaSink`, the exactly-once commit to a Delta table.
- ``maintenance``: optimize, vacuum and checkpoint under the maintenance policy.
"""

from table_topic.delta.location import DeltaLocation
from table_topic.delta.sink import DeltaSink

__all__ = ["DeltaLocation", "DeltaSink"]
