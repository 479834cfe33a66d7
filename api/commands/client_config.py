"""``--command-config FILE``: the Kafka client settings a command connects
with (TLS, SASL), as Kafka's own tools take them.

The file holds ``key=value`` lines (``#`` and ``!`` start comments, ``:``
works as the separator too). librdkafka's names are taken as they are
(``security.protocol``, ``sasl.mechanisms``, ``sasl.username``,
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location`` ...). The Java client's names that have a librdkafka
counterpart are translated, so a ``client.properties`` made for Kafka's
tools works: ``sasl.mechanism``; ``sasl.jaas.config`` with ``username`` and
``password`` (PLAIN and SCRAM login modules); ``ssl.truststore.location`` of
type PEM; ``ssl.endpoint.identification.algorithm`` left empty. Java key and
trust stores in JKS or PKCS12 cannot be read by librdkafka: such a file is
refused with a message naming the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["ClientConfigError", "peer_security", "read_client_config"]

_JAAS_FIELD = re.compile(r"""\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)\"""")
_KEY = re.compile(r"([^=:\s]+)\s*[=:]?\s*")
_JAVA_STORE_KEYS = ("ssl.keystore.location", "ssl.truststore.location")


class ClientConfigError(ValueError):
    """A ``--command-config`` file that cannot be used; the message names the key."""


def _logical_lines(text: str) -> list[str]:
    """Lines as Java's ``Properties.load`` sees them: a line ending in an odd
    number of backslashes goes on with the next one, its indent dropped."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _parse(text: str) -> dict[str, str]:
    """``key=value``, ``key: value`` or ``key value`` per logical line."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        m = _KEY.match(line)
        assert m is not None  # the pattern matches any non-empty line
        out[m.group(1)] = line[m.end() :].strip()
    return out


def _translate(props: dict[str, str]) -> dict[str, str]:
    out = dict(props)
    if "sasl.mechanism" in out:
        out.setdefault("sasl.mechanisms", out.pop("sasl.mechanism"))
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        fields = {k: v.replace('\\"', '"') for k, v in _JAAS_FIELD.findall(jaas)}
        if "username" not in fields or "password" not in fields:
            raise ClientConfigError(
                'sasl.jaas.config: only a login module with username="..." and '
                'password="..." (PLAIN, SCRAM) can be used here'
            )
        out.setdefault("sasl.username", fields["username"])
        out.setdefault("sasl.password", fields["password"])
    if out.get("ssl.endpoint.identification.algorithm", None) == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    store_type = out.pop("ssl.truststore.type", "").upper()
    if "ssl.truststore.location" in out:
        if store_type != "PEM":
            raise ClientConfigError(
                "ssl.truststore.location: only a PEM trust store can be read "
                "(set ssl.truststore.type=PEM, or ssl.ca.location to a PEM file)"
            )
        out.setdefault("ssl.ca.location", out.pop("ssl.truststore.location"))
    for key in _JAVA_STORE_KEYS:
        if key in out:
            raise ClientConfigError(
                f"{key}: Java key stores cannot be read; use ssl.certificate.location "
                "and ssl.key.location (PEM files)"
            )
    for key in ("ssl.truststore.password", "ssl.keystore.password", "ssl.keystore.type"):
        out.pop(key, None)
    return out


def read_client_config(path: str | Path) -> dict[str, str]:
    """The librdkafka settings of the properties file at ``path``."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from exc
    return _translate(_parse(text))


def peer_security(settings: dict[str, str]) -> Any:
    """The :class:`~ingest.cluster.peer_connection.PeerSecurity` of librdkafka
    ``settings`` (for the admin requests the CLI sends itself)."""
    from ingest.cluster.peer_connection import PEER_MECHANISMS, PeerSecurity
    from ingest.errors import ConfigError
    from ingest.security.listeners import SecurityProtocol

    name = settings.get("security.protocol", "PLAINTEXT").upper()
    try:
        protocol = SecurityProtocol(name)
    except ValueError:
        raise ClientConfigError(f"security.protocol: unknown protocol {name!r}") from None
    check = settings.get("ssl.endpoint.identification.algorithm", "https").lower() != "none"
    mechanism = settings.get("sasl.mechanisms", "PLAIN").upper() if protocol.uses_sasl else None
    if mechanism is not None and mechanism not in PEER_MECHANISMS:
        raise ClientConfigError(f"sasl.mechanisms: {mechanism!r} is not one of {PEER_MECHANISMS}")
    if protocol.uses_sasl and not (settings.get("sasl.username") and settings.get("sasl.password")):
        raise ClientConfigError("sasl.username / sasl.password: SASL needs both")
    try:
        return PeerSecurity(
            protocol,
            sasl_mechanism=mechanism,
            username=settings.get("sasl.username"),
            password=settings.get("sasl.password"),
            cafile=settings.get("ssl.ca.location"),
            certfile=settings.get("ssl.certificate.location"),
            keyfile=settings.get("ssl.key.location"),
            check_hostname=check,
        )
    except ConfigError as exc:
        raise ClientConfigError(str(exc)) from None
