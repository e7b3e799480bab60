"""The conversions read side: a partner's days, the orders list and the statements, through the API.

Every expected number is written from the rows built below (``scenario``), never computed by the code.
"""

import datetime as dt

import pytest
from django.contrib.auth.models import Permission

from conversions.models import Statement
from conversions.statements import close_month
from cpsproject.common.timeutil import to_local
from partners.services import partner_move
from stats.jobs.flush import flush
from tests.conversions.builders import ledger, make_order, refund
from tests.factories import at, create_staff, create_tree, feed, portal_client, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
URL = "/api/v1/partners/A1/conversions/?start=2026-11-20&end=2026-11-22"
CONVERSION_PERMS = ["view_order", "view_ledgerentry", "view_statement"]


def staff():
    from rest_framework.test import APIClient

    user = create_staff()
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="conversions", codename__in=CONVERSION_PERMS)
    )
    client = APIClient()
    client.login(username="staff", password="pw")
    return client


@pytest.fixture
def scenario():
    """Tree A ─ A1 ─ A1a, A ─ A2, B; orders around 2026-11-21 (business time); A1a moved under A2 afterwards."""
    tree = create_tree()
    a, a1, a1a, a2 = tree["A"], tree["A1"], tree["A1a"], tree["A2"]
    so1 = make_order("SO-1", partner=a1, openid="o-1", paid_at=at("2026-11-21 10:00"), amount=10_000)
    so2 = make_order(
        "SO-2",
        partner=a1a,
        openid="o-2",
        paid_at=at("2026-11-21 23:59:59"),
        amount=1_500,
        currency="USD",
        rate="7.1",
        amount_reporting=10_650,
    )
    so3 = make_order("SO-3", partner=a1a, openid="o-1", paid_at=at("2026-11-22 00:00"), amount=2_000)
    make_order("SO-4", partner=a2, openid="o-3", paid_at=at("2026-11-21 12:00"), amount=7_000)
    so5 = make_order("SO-5", partner=a1, openid="o-4", paid_at=at("2026-11-19 09:00"), amount=3_000)
    make_order("SO-6", partner=None, openid="o-9", paid_at=at("2026-11-21 12:00"), amount=500)
    refund(
        so5, ts=at("2026-11-21 08:00"), amount=3_000, status="cancelled"
    )  # all of it, paid before the range
    refund(so2, ts=at("2026-11-22 09:00"), amount=500, amount_reporting=3_550)
    ledger(so1, a1, 400, ts=at("2026-11-21 10:00"), share_bp=8000)
    ledger(so1, a, 75, ts=at("2026-11-21 10:00"), share_bp=1500)
    ledger(so2, a1, 85, ts=at("2026-11-21 23:59:59"), share_bp=1500)
    ledger(so5, a1, -120, ts=at("2026-11-21 08:00"), reason="cancellation", share_bp=8000)
    ledger(so2, a1, -28, ts=at("2026-11-22 09:00"), reason="refund", share_bp=1500)
    # Booked in December (as if November had been closed): still the 22nd's commission, by its event's day.
    ledger(so3, a1, 16, ts=at("2026-11-22 00:00"), share_bp=1500, booked=dt.date(2026, 12, 1))
    # The page views of A1's subtree on the 21st: four distinct buyers, one of them twice.
    feed(
        [
            pv_event(at("2026-11-21 09:00"), "A1", "o-1"),
            pv_event(at("2026-11-21 09:30"), "A1a", "o-2"),
            pv_event(at("2026-11-21 09:40"), "A1", "o-5"),
            pv_event(at("2026-11-21 09:50"), "A1a", "o-6"),
            pv_event(at("2026-11-21 10:50"), "A1a", "o-6"),
            pv_event(at("2026-11-21 10:50"), "A2", "o-3"),
        ],
        now=at("2026-11-21 11:00"),
    )
    flush(now=at("2026-11-22 00:10"))  # in SQL: read the same whatever day the test clock says it is
    partner_move(partner=a1a, new_parent=a2)  # old orders stay in A1's subtree, as attributed
    return tree


ZERO = {
    "orders": 0,
    "orders_self": 0,
    "buyers": 0,
    "buyers_self": 0,
    "gross": 0,
    "refunded": 0,
    "net": 0,
    "net_self": 0,
    "commission": 0,
    "conversion_rate": None,
}


def test_a_partners_days_and_total_follow_the_tree_at_attribution(scenario):
    body = staff().get(URL).json()
    assert body["partner"] == "A1" and body["currency"] == "CNY"
    assert body["days"] == [
        {"date": "2026-11-20", **ZERO, "reconciled": False},
        {
            "date": "2026-11-21",
            "orders": 2,  # SO-1 (own), SO-2 (A1a's, attributed while under A1)
            "orders_self": 1,
            "buyers": 2,
            "buyers_self": 1,
            "gross": 20_650,  # 10,000 + 10,650
            "refunded": 3_000,  # SO-5 cancelled, paid on the 19th
            "net": 17_650,
            "net_self": 7_000,  # 10,000 − 3,000
            "commission": 365,  # 400 + 85 − 120
            "conversion_rate": "0.5000",  # 2 buyers / 4 UV
            "reconciled": False,
        },
        {
            "date": "2026-11-22",
            "orders": 1,
            "orders_self": 0,
            "buyers": 1,
            "buyers_self": 0,
            "gross": 2_000,
            "refunded": 3_550,
            "net": -1_550,
            "net_self": 0,
            "commission": -12,  # −28 + 16
            "conversion_rate": None,  # no UV that day
            "reconciled": False,
        },
    ]
    assert body["total"] == {
        "orders": 3,
        "orders_self": 1,
        "buyers": 2,  # o-1 bought on both days: once over the range
        "buyers_self": 1,
        "gross": 22_650,
        "refunded": 6_550,
        "net": 16_100,
        "net_self": 7_000,
        "commission": 353,
        "conversion_rate": "0.5000",  # 2 / 4 distinct users over the range
    }


def test_the_new_parent_does_not_get_old_orders(scenario):
    body = staff().get("/api/v1/partners/A2/conversions/?start=2026-11-21&end=2026-11-21").json()
    day = body["days"][0]
    assert (day["orders"], day["orders_self"], day["gross"], day["commission"]) == (1, 1, 7_000, 0)
    assert day["conversion_rate"] == "1.0000"  # o-3, the one user A2's own tree had that day


def test_conversions_as_csv(scenario):
    response = staff().get(URL + "&format=csv")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0] == (
        "partner,date,orders,orders_self,buyers,buyers_self,gross,refunded,net,net_self,commission,"
        "conversion_rate,reconciled"
    )
    assert lines[2] == "A1,2026-11-21,2,1,2,1,20650,3000,17650,7000,365,0.5000,false"
    assert lines[3] == "A1,2026-11-22,1,0,1,0,2000,3550,-1550,0,-12,,false"


@pytest.mark.parametrize(
    ("params", "named"),
    [("start=2026-11-23&end=2026-11-22", "end"), ("start=21-11-2026", "start"), ("end=2026-02-30", "end")],
)
def test_bad_dates_are_a_400_naming_them(scenario, params, named):
    response = staff().get(f"/api/v1/partners/A1/conversions/?{params}")
    assert response.status_code == 400 and named in response.json()


def test_orders_list_with_money_and_status(scenario):
    body = staff().get("/api/v1/orders/?start=2026-11-19&end=2026-11-22").json()
    assert body["count"] == 6
    rows = {row["order_id"]: row for row in body["results"]}
    assert [row["order_id"] for row in body["results"]] == ["SO-3", "SO-2", "SO-6", "SO-4", "SO-1", "SO-5"]
    assert rows["SO-2"] == {
        "order_id": "SO-2",
        "partner": "A1a",
        "status": "partly_refunded",
        "paid_at": "2026-11-21T23:59:59+08:00",  # business time, as every time the API shows
        "currency": "USD",
        "amount": 1_500,
        "refunded": 500,
        "amount_reporting": 10_650,
        "commission": 57,  # 85 − 28
    }
    assert (rows["SO-5"]["status"], rows["SO-5"]["refunded"], rows["SO-5"]["commission"]) == (
        "cancelled",
        3_000,
        -120,
    )
    assert (rows["SO-1"]["status"], rows["SO-1"]["commission"]) == ("paid", 475)
    assert rows["SO-6"]["partner"] is None
    assert all("openid" not in row for row in body["results"])


def test_orders_filtered_by_partner_subtree_status_and_days(scenario):
    client = staff()
    listed = client.get("/api/v1/orders/?partner=A1&start=2026-11-19&end=2026-11-22").json()
    assert [r["order_id"] for r in listed["results"]] == ["SO-3", "SO-2", "SO-1", "SO-5"]
    cancelled = client.get("/api/v1/orders/?start=2026-11-19&end=2026-11-22&status=cancelled").json()
    assert [r["order_id"] for r in cancelled["results"]] == ["SO-5"]
    one_day = client.get("/api/v1/orders/?start=2026-11-22&end=2026-11-22").json()
    assert [r["order_id"] for r in one_day["results"]] == ["SO-3"]
    bad = client.get("/api/v1/orders/?status=lost")
    assert bad.status_code == 400 and "status" in bad.json()


def test_an_order_paid_nothing_is_paid_not_refunded(scenario):
    """A free order (a 0 paid: the event format allows it) has nothing refunded: it is "paid", as the admin says."""
    make_order("SO-0", partner=scenario["A1"], openid="o-7", paid_at=at("2026-11-20 10:00"), amount=0)
    client = staff()
    listed = client.get("/api/v1/orders/?start=2026-11-20&end=2026-11-20").json()["results"]
    assert [(r["order_id"], r["status"], r["refunded"]) for r in listed] == [("SO-0", "paid", 0)]
    paid = client.get("/api/v1/orders/?start=2026-11-19&end=2026-11-22&status=paid").json()["results"]
    assert [r["order_id"] for r in paid] == ["SO-3", "SO-6", "SO-4", "SO-1", "SO-0"]
    refunded = client.get("/api/v1/orders/?start=2026-11-19&end=2026-11-22&status=refunded").json()
    assert refunded["results"] == []


def test_each_status_the_list_shows_is_the_one_it_filters_by(scenario):
    """The page reads its lines' money in one query and the status filter in another: an order refunded in
    full by two partial refunds is "refunded" in both, one refunded in part "partly_refunded"."""
    full = make_order(
        "SO-7", partner=scenario["A1"], openid="o-7", paid_at=at("2026-11-20 10:00"), amount=900
    )
    refund(full, ts=at("2026-11-20 11:00"), amount=400)
    refund(full, ts=at("2026-11-20 12:00"), amount=500)
    client = staff()
    listed = client.get("/api/v1/orders/?start=2026-11-19&end=2026-11-22").json()["results"]
    shown = {row["order_id"]: row["status"] for row in listed}
    assert shown == {
        "SO-1": "paid",
        "SO-2": "partly_refunded",
        "SO-3": "paid",
        "SO-4": "paid",
        "SO-5": "cancelled",
        "SO-6": "paid",
        "SO-7": "refunded",
    }
    for status in ("paid", "partly_refunded", "refunded", "cancelled"):
        filtered = client.get(f"/api/v1/orders/?start=2026-11-19&end=2026-11-22&status={status}").json()
        assert {row["order_id"] for row in filtered["results"]} == {
            o for o, s in shown.items() if s == status
        }
        assert all(row["status"] == status for row in filtered["results"])


def test_a_portal_sees_its_subtree_only_and_never_an_openid(scenario):
    client = portal_client("A1")
    own = client.get(URL)
    assert own.status_code == 200 and own.json()["days"][1]["orders"] == 2
    assert b"o-1" not in own.content
    outside = client.get("/api/v1/partners/A2/conversions/")
    unknown = client.get("/api/v1/partners/NOPE/conversions/")
    assert outside.status_code == unknown.status_code == 404 and outside.content == unknown.content
    listed = client.get("/api/v1/orders/?start=2026-11-19&end=2026-11-22")
    assert [r["order_id"] for r in listed.json()["results"]] == ["SO-3", "SO-2", "SO-1", "SO-5"]
    # SO-1's commission is 475 for staff; A's 75 is outside A1's subtree: the portal reads its own 400.
    assert [r["commission"] for r in listed.json()["results"]] == [16, 57, 400, -120]
    assert b"o-" not in listed.content
    assert (
        client.get("/api/v1/orders/?partner=A2").content == client.get("/api/v1/orders/?partner=NOPE").content
    )
    assert client.get("/api/v1/orders/?partner=A2").status_code == 404


def test_statements_list_the_closed_months_and_their_entries(scenario):
    close_month(month=dt.date(2026, 11, 1), now=at("2026-12-08 00:00"))
    client = staff()
    body = client.get("/api/v1/partners/A1/statements/").json()
    statement = Statement.objects.get(partner__code="A1")
    assert body == [
        {
            "month": "2026-11",
            "amount": 337,
            "rows": 4,
            "closed_at": to_local(statement.closed_at).isoformat(),
            # Nothing under a traffic review: nothing held, released or reversed.
            "held_amount": 0,
            "held_rows": 0,
            "released_amount": 0,
            "released_rows": 0,
            "reversed_amount": 0,
            "reversed_rows": 0,
        }
    ]
    entries = client.get("/api/v1/partners/A1/statements/?month=2026-11").json()
    assert entries["count"] == 4
    assert [(e["order_id"], e["amount"], e["reason"], e["booked_date"]) for e in entries["results"]] == [
        ("SO-1", 400, "commission", "2026-11-21"),
        ("SO-2", 85, "commission", "2026-11-21"),
        ("SO-5", -120, "cancellation", "2026-11-21"),
        ("SO-2", -28, "refund", "2026-11-22"),
    ]
    not_closed = client.get("/api/v1/partners/A1/statements/?month=2026-12")
    assert not_closed.status_code == 404 and "month" in not_closed.json()
    bad = client.get("/api/v1/partners/A1/statements/?month=2026-13")
    assert bad.status_code == 400 and "month" in bad.json()


def test_a_portal_reads_its_own_statements_only(scenario):
    close_month(month=dt.date(2026, 11, 1), now=at("2026-12-08 00:00"))
    client = portal_client("A")
    assert client.get("/api/v1/partners/A/statements/").json()[0]["amount"] == 75
    child = client.get("/api/v1/partners/A1/statements/")
    unknown = client.get("/api/v1/partners/NOPE/statements/")
    assert child.status_code == unknown.status_code == 404 and child.content == unknown.content


def test_staff_without_the_conversions_permissions_is_refused(scenario):
    from rest_framework.test import APIClient

    create_staff("plain")
    client = APIClient()
    client.login(username="plain", password="pw")
    assert client.get(URL).status_code == 403
    assert client.get("/api/v1/orders/").status_code == 403


# --- Cost: a request's queries do not grow with its range ------------------------------------------------

# The token, the partner named, then: orders by day, reversals, commission, UV of the days, recounted days,
# buyers over the range, the range's UV / the count, the page's ids, the page's orders with their money.
# A conversions request read again while nothing was recorded: the token, the partner, the conversions tables'
# largest ids (the recorded figures then come from the cache), and the traffic's live days.
CONVERSIONS_QUERIES = 5
ORDERS_QUERIES = 5


def _queries(client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert client.get(url).status_code == 200  # the stats side's cache of final days filled: the steady state
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


@pytest.mark.parametrize("start", ["2026-10-24", "2025-11-23"])  # 30 days, 365 days
def test_a_request_makes_the_same_queries_over_30_days_as_over_a_year(scenario, start):
    client = portal_client("A")
    query = f"start={start}&end=2026-11-22"
    conversions = _queries(client, f"/api/v1/partners/A1/conversions/?{query}")
    listed = _queries(client, f"/api/v1/orders/?partner=A1&{query}")
    assert (conversions, listed) == (CONVERSIONS_QUERIES, ORDERS_QUERIES)


def test_what_is_recorded_after_a_read_is_in_the_next_read(scenario):
    """The recorded figures of a range are cached between requests: a new order, refund or commission entry
    is in the very next answer, whatever it changes."""
    client = portal_client("A")
    url = "/api/v1/partners/A1/conversions/?start=2026-11-19&end=2026-11-22"

    def total() -> tuple:
        body = client.get(url).json()["total"]
        return body["orders"], body["buyers"], body["gross"], body["refunded"], body["commission"]

    assert total() == (4, 3, 10_000 + 10_650 + 2_000 + 3_000, 3_550 + 3_000, 400 + 85 - 120 - 28 + 16)
    assert total() == (4, 3, 25_650, 6_550, 353)  # read again from the cache
    so8 = make_order(
        "SO-8", partner=scenario["A1"], openid="o-8", paid_at=at("2026-11-20 10:00"), amount=1_000
    )
    assert total() == (5, 4, 26_650, 6_550, 353)
    refund(so8, ts=at("2026-11-21 10:00"), amount=250)
    assert total() == (5, 4, 26_650, 6_800, 353)
    ledger(so8, scenario["A1"], 40, ts=at("2026-11-20 10:00"), share_bp=8000)
    assert total() == (5, 4, 26_650, 6_800, 393)


def test_a_partner_moved_after_a_read_reads_its_new_subtree(scenario):
    """A1a was moved under A2 after its orders: its subtree holds none of them. Moved back under A1, its path
    is the one they were attributed with again, and the next read finds them (not the cached answer)."""
    client = staff()
    url = "/api/v1/partners/A1a/conversions/?start=2026-11-19&end=2026-11-22"
    assert client.get(url).json()["total"]["orders"] == 0
    partner_move(partner=scenario["A1a"], new_parent=scenario["A1"])
    assert client.get(url).json()["total"]["orders"] == 2  # SO-2 and SO-3


def test_a_subtree_is_its_path_prefix_not_an_id_that_starts_alike(scenario):
    """Partner 1's subtree is "/1/…", never "/10/…": the subtree is read as a range of paths."""
    from conversions.models import Order
    from partners.models import Partner

    a = Partner.objects.get(code="A")
    # SO-4 (A2's) as if attributed under a partner whose id is A's followed by a 0 ("/3/" and "/30/").
    Order.objects.filter(order_id="SO-4").update(path=f"{a.path[:-1]}0/")
    client = staff()
    listed = client.get("/api/v1/orders/?partner=A&start=2026-11-19&end=2026-11-22").json()
    assert [r["order_id"] for r in listed["results"]] == ["SO-3", "SO-2", "SO-1", "SO-5"]
    days = client.get("/api/v1/partners/A/conversions/?start=2026-11-21&end=2026-11-21").json()
    assert days["total"]["orders"] == 2  # SO-1 and SO-2; SO-4's path is no longer A's


def test_a_range_without_buyers_converts_0_of_its_traffic_and_none_of_no_traffic(scenario):
    client = staff()
    quiet = client.get("/api/v1/partners/B/conversions/?start=2026-10-21&end=2026-10-22").json()
    assert quiet["total"]["conversion_rate"] is None  # no traffic, no order
    feed([pv_event(at("2026-11-21 09:00"), "B", "o-7")], now=at("2026-11-21 11:00"))
    # In SQL, read the same whatever day the test clock says it is (the range's days are read for the first
    # time after it: a flush more than a day late is not seen by days the stats cache holds as final).
    flush(now=at("2026-11-22 00:10"))
    body = client.get("/api/v1/partners/B/conversions/?start=2026-11-21&end=2026-11-22").json()
    assert [d["conversion_rate"] for d in body["days"]] == ["0.0000", None]
    assert (body["total"]["buyers"], body["total"]["conversion_rate"]) == (0, "0.0000")
