"""Security of the Kafka listener: listeners and their protocols, TLS, SASL
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with JWT validation in
``oauth``), re-authentication (KIP-368) and the credential stores."""

from __future__ import annotations

from ingest.security.credentials import (
    CredentialStore,
    MemoryCredentialStore,
    MetadataCredentialStore,
    UserCredentialInfo,
)
from ingest.security.listeners import Listener, SecurityProtocol, parse_listeners
from ingest.security.sasl import SaslAuthenticator, SecuritySession
from ingest.security.scram import ScramCredential, make_credential

__all__ = [
    "CredentialStore",
    "Listener",
    "MemoryCredentialStore",
    "MetadataCredentialStore",
    "SaslAuthenticator",
    "ScramCredential",
    "SecurityProtocol",
    "SecuritySession",
    "UserCredentialInfo",
    "make_credential",
    "parse_listeners",
]
