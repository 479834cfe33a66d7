"""Identifiers, page tokens and the error mapping of the REST catalog."""

from __future__ import annotations

import json

import pytest
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)

from catalog.rest.commits import parse_table_change
from catalog.rest.errors import IcebergHTTPError, UnsupportedOperationError, to_error_response
from catalog.rest.identifiers import decode_namespace, paginate


def test_namespace_path_splits_on_unit_separator() -> None:
    assert decode_namespace("a\x1fb") == ("a", "b")
    for bad in ("", "a\x1f", "a.b"):
        with pytest.raises(IcebergHTTPError) as info:
            decode_namespace(bad)
        assert info.value.code == 400


def test_page_tokens_walk_every_item_once_even_when_items_are_added() -> None:
    items = [(f"n{i}",) for i in range(5)]
    page = paginate(items, "", 2)
    assert page.items == [("n0",), ("n1",)]
    items.append(("n00",))  # sorts before the token; must not reappear or shift the listing
    page2 = paginate(items, page.next_token, 2)
    assert page2.items == [("n2",), ("n3",)]
    last = paginate(items, page2.next_token, 2)
    assert last.items == [("n4",)] and last.next_token is None
    assert paginate(items, None, None).next_token is None


@pytest.mark.parametrize("token", ["%%%", "bm90IGpzb24", "eyJhIjogMX0"])
def test_bad_page_tokens_are_400(token: str) -> None:
    with pytest.raises(IcebergHTTPError) as info:
        paginate([("a",)], token, 1)
    assert info.value.code == 400


@pytest.mark.parametrize(
    ("exc", "code", "type_"),
    [
        (NoSuchNamespaceError("x"), 404, "NoSuchNamespaceException"),
        (NoSuchTableError("x"), 404, "NoSuchTableException"),
        (TableAlreadyExistsError("x"), 409, "AlreadyExistsException"),
        (NamespaceNotEmptyError("x"), 409, "NamespaceNotEmptyException"),
        (CommitFailedException("x"), 409, "CommitFailedException"),
        (UnsupportedOperationError("x"), 406, "UnsupportedOperationException"),
        (ValueError("x"), 400, "BadRequestException"),
        (RuntimeError("boom"), 500, "InternalServerError"),
    ],
)
def test_pyiceberg_errors_map_to_the_spec(exc: Exception, code: int, type_: str) -> None:
    response = to_error_response(exc)
    assert response.status_code == code
    body = json.loads(bytes(response.body))
    assert body["error"]["code"] == code and body["error"]["type"] == type_


def test_table_change_parses_pyiceberg_models_and_rejects_unknown_actions() -> None:
    change = parse_table_change(
        {
            "identifier": {"namespace": ["a"], "name": "t"},
            "requirements": [{"type": "assert-create"}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        }
    )
    assert change.identifier == ("a", "t") and change.creates
    with pytest.raises(Exception) as info:
        parse_table_change({"requirements": [], "updates": [{"action": "nope"}]})
    assert to_error_response(info.value).status_code == 400
    with pytest.raises(Exception) as info:
        parse_table_change({"requirements": [], "updates": [], "extra": 1})
    assert to_error_response(info.value).status_code == 400


def test_path_names_are_form_decoded_from_the_raw_path() -> None:
    from catalog.rest.identifiers import path_names

    template = "/v1/namespaces/{namespace}/tables/{table}"
    decoded = {"namespace": "a+b", "table": "x+y"}
    # Java's URLEncoder: a space is '+'; pyiceberg's quote: a '+' is %2B.
    java = path_names(template, b"/v1/namespaces/a+b%1Fc/tables/x+y", decoded)
    assert java == {"namespace": "a b\x1fc", "table": "x y"}
    py = path_names(template, b"/v1/namespaces/a%2Bb/tables/x%2By%20z", decoded)
    assert py == {"namespace": "a+b", "table": "x+y z"}
    mounted = path_names(template, b"/catalog/v1/namespaces/n%25/tables/t", decoded)
    assert mounted == {"namespace": "n%", "table": "t"}
