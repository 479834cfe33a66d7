"""Named listeners and their security protocols, in Kafka's shape.

``listeners = ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://127.0.0.1:9094"]``
names each listener and where it binds; a name is a security protocol or is
mapped to one by ``listener_security_protocol_map`` (``{"INTERNAL": "SSL"}``);
``advertised_listeners`` says, per name, the address clients are told.
Without ``listeners`` the broker has one PLAINTEXT listener on ``host:port``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ingest.errors import ConfigError

__all__ = ["Listener", "SecurityProtocol", "parse_listeners"]


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: SecurityProtocol
    host: str  # where it binds ("" or 0.0.0.0: every interface)
    port: int  # 0: chosen by the OS at start
    advertised_host: str | None = None  # None: ``host``
    advertised_port: int | None = None  # None: the bound port


def _split(value: str, key: str) -> tuple[str, str, int]:
    name, sep, rest = value.partition("://")
    if not sep or not name:
        raise ConfigError(key, f"expected NAME://HOST:PORT, got {value!r}")
    host, colon, port = rest.rpartition(":")
    if not colon:
        raise ConfigError(key, f"expected NAME://HOST:PORT, got {value!r}")
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(key, f"port must be a number in {value!r}") from None
    if not 0 <= p <= 65535:
        raise ConfigError(key, f"port out of range in {value!r}")
    return name.upper(), host.strip("[]"), p


def parse_listeners(
    listeners: Sequence[str],
    advertised_listeners: Sequence[str],
    protocol_map: Mapping[str, str],
    *,
    default_host: str,
    default_port: int,
    advertised_host: str | None = None,
    advertised_port: int | None = None,
) -> list[Listener]:
    """The broker's listeners, the first one being the default (the address
    the broker registers in a cluster). Raises ``ConfigError`` naming the key."""
    if not listeners:
        return [
            Listener(
                "PLAINTEXT",
                SecurityProtocol.PLAINTEXT,
                default_host,
                default_port,
                advertised_host,
                advertised_port,
            )
        ]
    mapping = {k.upper(): v.upper() for k, v in protocol_map.items()}
    advertised: dict[str, tuple[str, int]] = {}
    for value in advertised_listeners:
        name, host, port = _split(value, "advertised_listeners")
        advertised[name] = (host, port)
    out: list[Listener] = []
    for value in listeners:
        name, host, port = _split(value, "listeners")
        proto_name = mapping.get(name, name)
        try:
            protocol = SecurityProtocol(proto_name)
        except ValueError:
            raise ConfigError(
                "listener_security_protocol_map",
                f"listener {name} has no security protocol (one of "
                f"{', '.join(p.value for p in SecurityProtocol)})",
            ) from None
        if any(listener.name == name for listener in out):
            raise ConfigError("listeners", f"listener name {name} appears twice")
        adv_host, adv_port = advertised.get(name, (None, None))
        if not out and name not in advertised:  # the default listener keeps the old keys
            adv_host, adv_port = advertised_host, advertised_port
        out.append(Listener(name, protocol, host, port, adv_host or None, adv_port or None))
    unknown = set(advertised) - {listener.name for listener in out}
    if unknown:
        raise ConfigError("advertised_listeners", f"no listener named {sorted(unknown)}")
    return out
