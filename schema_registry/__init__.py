"""Tidelake's built-in, Confluent-compatible Schema Registry.

Mount it with ``create_app(RegistrySettings(...))``; decode with the formats in
``schema_registry.formats``. Nothing is constructed at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schema_registry.errors import SchemaRegistryError

if TYPE_CHECKING:
    from schema_registry.app import RegistrySettings, create_app
    from schema_registry.service import RegistryService

__all__ = ["RegistryService", "RegistrySettings", "SchemaRegistryError", "create_app"]


def __getattr__(name: str) -> Any:  # lazy: importing the package does not import FastAPI
    if name in ("RegistrySettings", "create_app"):
        from schema_registry import app

        return getattr(app, name)
    if name == "RegistryService":
        from schema_registry.service import RegistryService

        return RegistryService
    raise AttributeError(name)
