"""OAuth2 tokens of the REST catalog expire as claimed and cost the server no memory."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from catalog.app import create_app
from catalog.config import CatalogSettings
from catalog.rest.auth import RestAuth

FORM = {"grant_type": "client_credentials", "client_id": "app", "client_secret": "pw"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def test_issued_token_expires_after_its_claimed_lifetime() -> None:
    clock = Clock()
    auth = RestAuth(oauth2_clients={"app": "pw"}, token_lifetime_s=60, clock=clock)
    issued = auth.issue("app", "pw")
    assert issued is not None
    assert issued.expires_in == 60
    assert auth.accepts(_bearer(issued.token))
    clock.now += 59
    assert auth.accepts(_bearer(issued.token))
    clock.now += 2
    assert not auth.accepts(_bearer(issued.token))


def test_tokens_are_not_stored_so_issuing_many_costs_no_memory() -> None:
    auth = RestAuth(oauth2_clients={"app": "pw"})
    before = auth.state_size()
    for _ in range(1000):
        assert auth.issue("app", "pw") is not None
    assert auth.state_size() == before


def test_forged_tampered_and_foreign_tokens_are_refused() -> None:
    auth = RestAuth(oauth2_clients={"app": "pw"})
    other = RestAuth(oauth2_clients={"app": "pw"})  # another process, another secret
    issued = auth.issue("app", "pw")
    assert issued is not None
    head, _, mac = issued.token.rpartition(".")
    for token in (
        "made-up",
        "",
        head + ".AAAA",
        head[:-2] + "xx." + mac,
        issued.token + "x",
        "tl1..",
        "tl1.%%%.%%%",
    ):
        assert not auth.accepts(_bearer(token)), token
    foreign = other.issue("app", "pw")
    assert foreign is not None and not auth.accepts(_bearer(foreign.token))
    assert auth.issue("app", "wrong") is None
    assert auth.issue("nobody", "pw") is None


def test_a_configured_secret_lets_processes_share_tokens() -> None:
    one = RestAuth(oauth2_clients={"app": "pw"}, secret="s3cret")
    two = RestAuth(oauth2_clients={"app": "pw"}, secret="s3cret")
    issued = one.issue("app", "pw")
    assert issued is not None and two.accepts(_bearer(issued.token))


def test_tokens_of_a_removed_client_are_refused() -> None:
    issued = RestAuth(oauth2_clients={"app": "pw"}, secret="k").issue("app", "pw")
    assert issued is not None
    assert not RestAuth(oauth2_clients={"other": "pw"}, secret="k").accepts(_bearer(issued.token))


def test_static_tokens_never_expire() -> None:
    clock = Clock()
    auth = RestAuth(tokens=["static"], token_lifetime_s=1, clock=clock)
    clock.now += 10_000
    assert auth.accepts("Bearer static")


def test_token_endpoint_claims_the_configured_lifetime_and_expired_tokens_get_401(
    tmp_path: Path,
) -> None:
    settings = CatalogSettings(
        data_dir=tmp_path, serve_oauth2_clients={"app": "pw"}, serve_token_lifetime_seconds=120
    )
    app = create_app(settings)
    clock = Clock()
    app.state.rest_auth.clock = clock
    client = TestClient(app)
    answer = client.post("/v1/oauth/tokens", data=FORM)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["expires_in"] == 120 and body["token_type"] == "bearer"
    headers = {"Authorization": _bearer(body["access_token"])}
    assert client.get("/v1/namespaces", headers=headers).status_code == 200
    clock.now += 121
    expired = client.get("/v1/namespaces", headers=headers)
    assert expired.status_code == 401
    assert expired.json()["error"] == {
        "message": "Not authorized to make this request",
        "type": "NotAuthorizedException",
        "code": 401,
    }
    assert client.get("/v1/config", headers=headers).status_code == 401


def test_token_exchange_refreshes_a_valid_token_only(tmp_path: Path) -> None:
    settings = CatalogSettings(data_dir=tmp_path, serve_oauth2_clients={"app": "pw"})
    app = create_app(settings)
    clock = Clock()
    app.state.rest_auth.clock = clock
    client = TestClient(app)
    token = client.post("/v1/oauth/tokens", data=FORM).json()["access_token"]
    exchange = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }
    clock.now += 1800
    refreshed = client.post("/v1/oauth/tokens", data=exchange)
    assert refreshed.status_code == 200, refreshed.text
    new_token = refreshed.json()["access_token"]
    clock.now += 1800  # the first token is now expired, the refreshed one is not
    assert (
        client.get("/v1/namespaces", headers={"Authorization": _bearer(token)}).status_code == 401
    )
    assert (
        client.get("/v1/namespaces", headers={"Authorization": _bearer(new_token)}).status_code
        == 200
    )
    stale = client.post("/v1/oauth/tokens", data=exchange)
    assert stale.status_code == 400 and stale.json()["error"] == "invalid_grant"


def test_issued_tokens_carry_their_expiry_where_clients_look_for_it() -> None:
    import base64
    import json

    clock = Clock()
    issued = RestAuth(oauth2_clients={"app": "pw"}, token_lifetime_s=90, clock=clock).issue(
        "app", "pw"
    )
    assert issued is not None
    payload = issued.token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["exp"] == int(clock.now) + 90 and claims["sub"] == "app"


def test_a_token_lives_at_least_its_claimed_lifetime_from_a_fractional_clock() -> None:
    clock = Clock()
    clock.now += 0.9
    auth = RestAuth(oauth2_clients={"app": "pw"}, token_lifetime_s=5, clock=clock)
    issued = auth.issue("app", "pw")
    assert issued is not None
    clock.now += 4.95  # inside the claimed 5 s (Iceberg's Java client refreshes at 4.5 s)
    assert auth.refresh(issued.token) is not None
