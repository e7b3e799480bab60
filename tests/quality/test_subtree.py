"""A partner's subtree beside its own traffic: the signals that add up, in the API and on the partner page."""

import pytest
from django.test import Client

from quality.flush import flush_quality
from quality.models import QualityDay
from quality.networks import import_networks
from tests.factories import at, create_staff, create_tree, feed, portal_client, pv_event, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)]

DAY, EVE = "2026-11-21", "2026-11-20"
NOON = at("2026-11-21 12:00")
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"
RANGE = f"?start={EVE}&end={DAY}"


def view(time: str, code: str, openid: str, ip: str, ua: str = CHROME) -> bytes:
    return pv_event(at(f"{DAY} {time}"), code, openid, ip=ip, ua=ua)


@pytest.fixture
def tree_traffic() -> None:
    """A ─ A1 ─ A1a, A ─ A2, and B, each with views of its own on DAY; only A1a had views on EVE."""
    create_tree()
    import_networks("cidr,label\n198.51.100.0/24,hosting\n")
    feed(
        # A: 2 views, one of them a crawler
        [
            view("10:00", "A", "a-1", "203.0.113.1"),
            view("10:01", "A", "a-2", "203.0.113.2", "Go-http-client/1.1"),
        ]
        # A1: one buyer reloading 4 times within 30 s from a listed network: 3 repeats, 4 listed
        + [view(f"10:00:{s:02d}", "A1", "r-1", "198.51.100.7") for s in (0, 10, 20, 30)]
        # A1a: 3 buyers, one through a crawler
        + [
            view("11:00", "A1a", f"k-{n}", f"192.0.2.{n}", "okhttp/4.9.0" if n == 1 else CHROME)
            for n in (1, 2, 3)
        ]
        # A2: 5 buyers behind one address; B (another tree): 7 views
        + [view("11:00", "A2", f"s-{n}", "203.0.113.50") for n in range(5)]
        + [view("11:00", "B", f"b-{n}", f"203.0.113.{100 + n}") for n in range(7)],
        now=NOON,
    )
    feed(
        [pv_event(at(f"{EVE} 20:00"), "A1a", f"e-{n}", ip="192.0.2.9") for n in range(2)],
        now=at(f"{EVE} 21:00"),
    )
    flush_quality(now=NOON)
    # Orders attributed by a view, as the conversions app would have recorded them: A1 2, A1a 1.
    QualityDay.objects.filter(partner__code="A1", date=DAY).update(orders=2, orders_by_view=2)
    QualityDay.objects.filter(partner__code="A1a", date=DAY).update(orders=1, orders_by_view=1)


def days(client, code: str) -> dict[str, dict]:
    response = client.get(f"/api/v1/partners/{code}/quality/{RANGE}")
    assert response.status_code == 200
    return {day["date"]: day for day in response.json()["days"]}


def test_a_day_adds_up_the_partner_and_its_descendants_beside_its_own_figures(tree_traffic):
    answer = days(staff_client(), "A")
    own = answer[DAY]
    assert (own["pv"], own["automated_pv"], own["repeat_pv"], own["listed_pv"], own["distinct_ips"]) == (
        2,
        1,
        0,
        0,
        2,
    )
    # A 2 + A1 4 + A1a 3 + A2 5; crawlers: A's and A1a's; repeats and listed views: A1's; orders: A1 2 + A1a 1
    assert own["subtree"] == {
        "pv": 14,
        "automated_pv": 2,
        "repeat_pv": 3,
        "listed_pv": 4,
        "orders_by_view": 3,
    }
    # EVE: A had no view of its own, A1a had 2
    assert (answer[EVE]["pv"], answer[EVE]["distinct_ips"]) == (0, 0)
    assert answer[EVE]["subtree"] == {
        "pv": 2,
        "automated_pv": 0,
        "repeat_pv": 0,
        "listed_pv": 0,
        "orders_by_view": 0,
    }
    middle = days(staff_client("staff2"), "A1")[DAY]["subtree"]
    assert middle == {"pv": 7, "automated_pv": 1, "repeat_pv": 3, "listed_pv": 4, "orders_by_view": 3}
    # A root without descendants: its subtree is itself
    assert days(staff_client("staff3"), "B")[DAY]["subtree"]["pv"] == 7


def test_a_portal_reads_its_own_subtrees_figures_and_no_other(tree_traffic):
    mid = portal_client("A1")
    assert days(mid, "A1")[DAY]["subtree"] == {
        "pv": 7,
        "automated_pv": 1,
        "repeat_pv": 3,
        "listed_pv": 4,
        "orders_by_view": 3,
    }
    assert days(mid, "A1a")[DAY]["subtree"]["pv"] == 3
    # Its parent (whose subtree holds A and A2) is answered as a partner that does not exist.
    assert mid.get(f"/api/v1/partners/A/quality/{RANGE}").status_code == 404
    leaf = portal_client("A1a")
    assert days(leaf, "A1a")[DAY]["subtree"] == {
        "pv": 3,
        "automated_pv": 1,
        "repeat_pv": 0,
        "listed_pv": 0,
        "orders_by_view": 1,
    }
    assert leaf.get(f"/api/v1/partners/A1/quality/{RANGE}").status_code == 404


def test_the_schema_documents_every_key_of_a_day_and_of_its_subtree(tree_traffic):
    schema = staff_client().get("/api/v1/schema/").json()["components"]["schemas"]
    day = days(staff_client("staff2"), "A")[DAY]
    assert set(schema["QualityDay"]["properties"]) == set(day)
    assert "subtree" in schema["QualityDay"]["required"]
    assert set(schema["QualitySubtreeDay"]["properties"]) == set(day["subtree"])
    assert set(schema["QualitySubtreeDay"]["required"]) == set(day["subtree"])
    assert "own only" in schema["QualityDay"]["properties"]["subtree"]["description"]


def viewer() -> Client:
    client = Client()
    client.force_login(create_staff("viewer"))
    return client


def panel(client: Client, code: str, **headers) -> str:
    page = client.get(f"/admin/network/{code}/{RANGE}", **headers).content.decode()
    start = page.index('id="quality-partner"')
    return page[start : page.index("</section>", start)]


def test_the_partner_page_shows_a_subtree_line_under_each_day(tree_traffic):
    table = panel(viewer(), "A")
    line = table[table.index(f'<tr class="subtree" data-subtree-date="{DAY}">') :]
    line = line[: line.index("</tr>")]
    assert '<td class="pv">14</td>' in line
    # shares of the subtree's 14 views (each carried an address): 2 crawled, 3 repeats, 4 listed
    assert '<td class="automated">2<span class="share">14.3%</span></td>' in line
    assert '<td class="repeats">3<span class="share">21.4%</span></td>' in line
    assert '<td class="listed">4<span class="share">28.6%</span></td>' in line
    assert '<td class="orders">3</td>' in line
    assert '<td class="ips" colspan="3">own only</td>' in line
    # The own line stays A's own: 2 views.
    own = table[table.index(f'<tr data-date="{DAY}">') :]
    assert '<td class="pv">2</td>' in own[: own.index("</tr>")]
    # EVE: only a descendant had views; A's own line is 0 and its subtree line 2.
    eve = table[table.index(f'<tr data-date="{EVE}">') :]
    assert '<td class="pv">0</td>' in eve[: eve.index("</tr>")]
    assert f'<tr class="subtree" data-subtree-date="{EVE}">' in table
    assert "do not add up" in table


def test_a_partner_without_descendants_has_no_subtree_line(tree_traffic):
    table = panel(viewer(), "B")
    assert '<tr data-date="2026-11-21">' in table
    assert 'class="subtree"' not in table and "do not add up" not in table


def test_the_subtree_line_speaks_chinese(tree_traffic):
    table = panel(viewer(), "A", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "含下级合计" in table and "仅自身" in table and "不能相加" in table
