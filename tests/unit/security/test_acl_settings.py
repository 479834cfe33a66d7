"""The authorizer's broker settings: off by default, and refused when unusable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingest.config import BrokerConfig


def test_the_authorizer_is_off_by_default_and_closed_when_on() -> None:
    config = BrokerConfig()
    assert config.authorizer == "none"
    assert config.allow_everyone_if_no_acl_found is False
    assert BrokerConfig(authorizer="acl").authorizer == "acl"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"authorizer": "kafka.security.authorizer.AclAuthorizer"}, "authorizer"),
        ({"super_users": ["admin"]}, "super_users"),
        ({"acl_refresh_interval_ms": 0}, "acl_refresh_interval_ms"),
    ],
)
def test_unusable_settings_name_their_key(settings: dict[str, object], key: str) -> None:
    with pytest.raises(ValidationError) as info:
        BrokerConfig(**settings)  # type: ignore[arg-type]
    assert str(info.value.errors()[0]["loc"][0]) == key
