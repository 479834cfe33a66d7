"""The catalog web page, driven by headless Chromium: what a person would see."""

from __future__ import annotations

from html.parser import HTMLParser

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.types import IntegerType

from tests.support.chromium import dump_dom


class _Visible(HTMLParser):
    """Text per element id, skipping hidden elements, scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str | None, bool]] = []
        self.texts: dict[str, list[str]] = {}
        self.all: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        hidden = "hidden" in a or tag in {"script", "style", "head", "title"}
        if tag in {"br", "meta", "link", "img", "input"}:
            return
        self.stack.append((tag, a.get("id"), hidden))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if any(h for _, _, h in self.stack) or not data.strip():
            return
        self.all.append(data.strip())
        for _, ident, _ in self.stack:
            if ident:
                self.texts.setdefault(ident, []).append(data.strip())

    def text(self, ident: str) -> str:
        return " ".join(self.texts.get(ident, []))


def render(url: str) -> _Visible:
    dom = dump_dom(url)
    assert 'data-state="ready"' in dom, "the page's script did not finish"
    page = _Visible()
    page.feed(dom)
    return page


@pytest.fixture
def shop(rest: RestCatalog, ns: str) -> tuple[str, int]:
    table = rest.create_table(
        (ns, "orders"), pa.schema([("id", pa.int64()), ("item", pa.string())])
    )
    table.append(pa.table({"id": [1, 2], "item": ["tea", "cake"]}))
    table.append(pa.table({"id": [3], "item": ["scone"]}))
    with table.update_schema() as update:
        update.add_column("qty", IntegerType())
    snapshot = rest.load_table((ns, "orders")).metadata.current_snapshot_id
    assert snapshot is not None
    return ns, snapshot


def test_table_page_shows_schema_snapshots_files_and_rows(
    server_url: str, shop: tuple[str, int]
) -> None:
    ns, snapshot_id = shop
    page = render(f"{server_url}/ui/#/ns/{ns}/table/orders")
    assert ns in page.text("namespaces")
    assert page.text("tables") == "orders"
    assert page.text("title") == f"{ns}.orders"
    assert page.text("error") == ""
    schema = page.text("schema")
    assert (
        "1 id long optional" in schema
        and "2 item string optional" in schema
        and "3 qty int" in schema
    )
    snapshots = page.text("snapshots")
    assert f"{snapshot_id} " in snapshots and "append" in snapshots and "current" in snapshots
    assert "2 snapshots" in page.text("summary")
    assert page.text("files").startswith("2 data files, 3 records")
    preview = page.text("preview")
    assert preview.startswith("id item qty") and "tea" in preview and "scone" in preview


def test_namespace_page_lists_its_tables(server_url: str, shop: tuple[str, int]) -> None:
    ns, _ = shop
    page = render(f"{server_url}/ui/#/ns/{ns}")
    assert page.text("title") == f"Namespace {ns}"
    assert page.text("tables") == "orders"
    assert "schema" not in page.texts  # the table view stays hidden


def test_unknown_table_shows_the_error(server_url: str, ns: str) -> None:
    page = render(f"{server_url}/ui/#/ns/{ns}/table/ghost")
    assert page.text("error").startswith("NoSuchTableException")
