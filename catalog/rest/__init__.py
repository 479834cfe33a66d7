"""The built-in Iceberg REST catalog service.

``catalog.rest.router.create_rest_router(catalog_provider, auth=..., warehouse=...)``
returns the ``/v1/...`` routes over any pyiceberg catalog; ``catalog.rest.errors``
maps pyiceberg's exceptions to the spec's error model; ``catalog.rest.commits``
applies requirements and updates (single tables, staged creates, transactions).
"""

__all__: list[str] = []
