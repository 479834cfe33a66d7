"""Signing keys, JWKS documents and JWTs for OAUTHBEARER tests (the test is
the identity provider: it signs tokens whose keys the broker reads)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.test"
AUDIENCE = "tidelake"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    alg: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algo = RSAAlgorithm if self.alg.startswith(("RS", "PS")) else ECAlgorithm
        data: dict[str, Any] = json.loads(algo.to_jwk(self.private.public_key()))
        data.update({"kid": self.kid, "use": "sig", "alg": self.alg})
        return data

    def token(self, subject: str = "alice", lifetime_s: float = 300, **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {
            "sub": subject,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": int(now + lifetime_s),
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, algorithm=self.alg, headers={"kid": self.kid})


def rsa_key(kid: str = "rsa-1") -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str = "ec-1") -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [k.jwk() for k in keys]}


def initial_response(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()
