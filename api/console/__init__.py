"""The web console at ``/ui``: topics (with a message browser), consumer
groups, schemas, tables and brokers, over the admin API's JSON endpoints.

Everything is served from this package (no CDN); charts are hand-drawn SVG.
The catalog room's table browser stays reachable at ``/ui/catalog/``.
"""

from api.console.mount import mount_console

__all__ = ["mount_console"]
