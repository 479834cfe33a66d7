"""Compatibility levels and the (transitive) checks Confluent applies on register."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from schema_registry.errors import InvalidCompatibilityLevel
from schema_registry.formats.base import ParsedSchema

__all__ = ["CompatibilityLevel", "check_compatibility", "DEFAULT_LEVEL"]


class CompatibilityLevel(StrEnum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @classmethod
    def parse(cls, value: object) -> CompatibilityLevel:
        if isinstance(value, str):
            try:
                return cls(value.upper())
            except ValueError:
                pass
        raise InvalidCompatibilityLevel(
            f"Invalid compatibility level. Valid values are none, backward, forward, full, "
            f"backward_transitive, forward_transitive, and full_transitive; got {value!r}"
        )

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = CompatibilityLevel.BACKWARD


def check_compatibility(
    new: ParsedSchema,
    existing: Sequence[tuple[int, ParsedSchema]],
    level: CompatibilityLevel,
    *,
    all_versions: bool | None = None,
) -> list[str]:
    """Messages explaining why ``new`` may not follow ``existing`` (oldest first); empty if it may.

    Backward: the new schema reads data written with the old one. Forward: the
    old schema reads data written with the new one. Non-transitive levels check
    only the latest existing version unless ``all_versions`` says otherwise.
    """
    if level is CompatibilityLevel.NONE or not existing:
        return []
    transitive = level.transitive if all_versions is None else all_versions
    targets = existing if transitive else existing[-1:]
    messages: list[str] = []
    for version, old in reversed(targets):
        if level.backward:
            for m in new.compatibility_errors(old):
                messages.append(f"{m} (backward, against version {version})")
        if level.forward:
            for m in old.compatibility_errors(new):
                messages.append(f"{m} (forward, against version {version})")
        if messages:
            break
    return messages
