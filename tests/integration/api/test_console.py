"""The web console at /ui, driven by headless Chromium against a running
platform with data in it: what a person sees on each page."""

from __future__ import annotations

import re

from tests.integration.api.console_data import SampleData
from tests.integration.catalog.test_ui_chromium import _Visible
from tests.support.chromium import dump_dom


class Page:
    def __init__(self, dom: str) -> None:
        self.dom = dom
        self.visible = _Visible()
        self.visible.feed(dom)

    def text(self, ident: str) -> str:
        return self.visible.text(ident)

    def element(self, tag: str, ident: str) -> str:
        m = re.search(rf"<{tag}[^>]*id=\"{ident}\".*?</{tag}>", self.dom, re.S)
        assert m is not None, f"no <{tag} id={ident}> on the page"
        return m.group(0)


def load(url: str) -> Page:
    dom = dump_dom(url)
    assert '<body data-state="ready"' in dom, "the console's script did not finish"
    return Page(dom)


def ui(data: SampleData, fragment: str) -> Page:
    return load(f"{data.platform.http_url}/ui/#{fragment}")


def rows(page: Page, table_id: str) -> list[str]:
    table = page.element("table", table_id)
    body = table[table.index("<tbody>") :]
    return [re.sub(r"<[^>]+>", " ", r) for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def cells(row: str) -> list[str]:
    return row.split()


def test_topics_page_lists_partitions_messages_retention_and_the_table_topic_flag(
    data: SampleData,
) -> None:
    page = ui(data, "/topics")
    assert page.text("page-title") == "Topics"
    orders = next(r for r in rows(page, "topics-table") if " orders " in r)
    clicks = next(r for r in rows(page, "topics-table") if " clicks " in r)
    assert cells(orders)[:3] == ["orders", "2", "12"]  # name, partitions, messages
    assert "24.0 h" in orders  # retention.ms 86400000
    assert re.search(r" \d+(\.\d)? (B|KiB) ", orders)  # a size (batching decides the bytes)
    assert "msg/s" in orders and "B/s" in orders  # message and byte rates
    assert "yes" in clicks and "default.clicks" in clicks
    assert "object storage: healthy" == page.text("storage")


def test_message_browser_shows_avro_values_decoded_and_text_keys(data: SampleData) -> None:
    page = ui(data, "/topics/orders?partition=0")
    assert page.text("page-title") == "Topic orders"
    shown = rows(page, "messages-table")
    assert len(shown) == 6
    first = shown[0]
    assert "order-0" in first  # the key as text, not base64
    assert f"avro · schema {data.schema_ids[1]} (orders-value)" in first
    assert '"item": "tea"' in first.replace("&quot;", '"') and "qty" in first
    assert "source=" in first and "console-test" in first
    partitions = rows(page, "partitions-table")
    assert [cells(r)[:5] for r in partitions] == [
        ["0", "1", "0", "6", "6"],
        ["1", "1", "0", "6", "6"],
    ]
    assert "retention.ms" in page.text("configs-table")


def test_message_browser_starts_at_an_offset_or_a_timestamp(data: SampleData) -> None:
    by_offset = rows(ui(data, "/topics/orders?partition=1&offset=4"), "messages-table")
    assert [cells(r)[0] for r in by_offset] == ["4", "5"]
    ts = data.first_timestamps[1]  # record 3 of partition 1
    by_time = rows(ui(data, f"/topics/orders?partition=1&timestamp={ts}"), "messages-table")
    assert [cells(r)[0] for r in by_time] == ["3", "4", "5"]
    assert "order-7" in by_time[0]


def test_message_browser_leaves_transaction_markers_out(data: SampleData) -> None:
    shown = rows(ui(data, "/topics/ledger?partition=0"), "messages-table")
    assert [cells(r)[0] for r in shown] == ["0", "1", "2"]
    assert "entry-2" in shown[2] and "credit 2" in shown[2]


def test_group_page_shows_members_assignment_lag_per_partition_and_a_lag_chart(
    data: SampleData,
) -> None:
    listing = rows(ui(data, "/groups"), "groups-table")
    billing = next(r for r in listing if " billing " in r)
    assert cells(billing)[:4] == ["billing", "Stable", "1", "orders"] and cells(billing)[-1] == "4"
    page = ui(data, "/groups/billing")
    assert page.text("group-lag") == "4"
    offsets = rows(page, "offsets-table")
    assert [cells(r)[:5] for r in offsets] == [
        ["orders", "0", "4", "6", "2"],
        ["orders", "1", "4", "6", "2"],
    ]
    members = page.text("members-table")
    assert "billing-app" in members and "orders [0, 1]" in members
    chart = page.element("svg", "lag-chart")
    assert 'data-series="lag of billing"' in chart and "<polyline" in chart


def test_schema_pages_show_versions_compatibility_text_and_a_diff(data: SampleData) -> None:
    subjects = rows(ui(data, "/schemas"), "subjects-table")
    orders = next(r for r in subjects if "orders-value" in r)
    assert "AVRO" in orders and "1, 2" in orders and "BACKWARD" in orders
    page = ui(data, "/schemas/orders-value")
    assert page.text("compatibility") == "BACKWARD"
    assert '"qty"' in page.text("schema-text").replace("&quot;", '"')
    diff = page.element("pre", "schema-diff")
    added = re.findall(r'<div class="add">(.*?)</div>', diff)
    assert any("qty" in line for line in added), diff
    assert not re.findall(r'<div class="del">', diff)


def test_tables_page_shows_table_topic_status_charts_and_catalog_tables(data: SampleData) -> None:
    page = ui(data, "/tables")
    status = next(r for r in rows(page, "table-topics-table") if " clicks " in r)
    assert "default.clicks" in status and "40" in cells(status)
    assert " Iceberg + Delta " in status  # table.topic.format=both
    shipments = next(r for r in rows(page, "table-topics-table") if " shipments " in r)
    assert cells(shipments)[2] == "Iceberg"
    assert cells(shipments)[4:5] == ["0"] and "2" in cells(shipments)  # lag 0, 2 rows
    table = page.element("table", "table-topics-table")
    assert re.search(r'<a href="#/topics/shipments\.dlq">1</a>', table)  # 1 dead letter, linked
    assert "<polyline" in page.element("svg", "freshness-chart")
    assert "<polyline" in page.element("svg", "rows-chart")
    assert "clicks" in page.text("catalog-tables")
    assert 'href="catalog/#/ns/default/table/clicks"' in page.element("table", "catalog-tables")


def test_a_table_topic_links_to_its_table_and_dead_letter_topic(data: SampleData) -> None:
    page = ui(data, "/topics/clicks")
    links = page.element("p", "table-links")
    assert 'href="catalog/#/ns/default/table/clicks"' in links
    assert 'href="#/topics/clicks.dlq"' in links
    assert page.text("table-links").startswith("Table topic → table default.clicks")


def test_brokers_page_shows_the_broker_its_partitions_and_controller(data: SampleData) -> None:
    page = ui(data, "/brokers")
    broker = rows(page, "brokers-table")
    assert len(broker) == 1
    # node 1 leads orders' 2 partitions, clicks' 1 and the dead-letter topic's, if any
    assert cells(broker[0])[0] == "1" and "live" in broker[0]
    assert page.text("controller") == "1"
    assert "<svg" in page.element("svg", "bytes-chart")


def test_the_catalog_browser_shows_a_table_topics_table_under_ui_catalog(data: SampleData) -> None:
    from tests.integration.catalog.test_ui_chromium import render

    page = render(f"{data.platform.http_url}/ui/catalog/#/ns/default/table/clicks")
    assert page.text("title") == "default.clicks" and page.text("error") == ""
    assert "click " in page.text("preview")
    assert page.text("storage") == "object storage: healthy"
