"""The platform's Iceberg catalog.

- ``catalog.config.CatalogSettings`` and ``catalog.factory.load_platform_catalog``:
  one configuration-driven pyiceberg catalog (sql, rest, glue, hive, and s3tables /
  nessie through the Iceberg REST protocol those services serve).
- ``catalog.app.create_app``: the HTTP app (Iceberg REST catalog at ``/v1``,
  browse API at ``/api/v1/catalog``, web page at ``/ui``);
  ``catalog.rest.router.create_rest_router`` for the REST routes alone.
- ``catalog.browse``: browsing queries shared by the API and the CLI.

Nothing is imported here, so that ``import catalog.factory`` stays cheap.
"""

__all__: list[str] = []
