"""Table property names that Tidelake's writers and maintenance jobs share."""

from __future__ import annotations

__all__ = ["REWRITE_LEASE_PROPERTY"]

# Set (epoch milliseconds) by a data-file rewrite while it runs. A writer whose
# commit would add position deletes holds that commit until the time has passed
# or the property is gone: a delete into a file being rewritten makes the
# rewrite fail, and a stream of upserts could starve compaction for ever.
REWRITE_LEASE_PROPERTY = "tidelake.maintenance.rewrite-until"
