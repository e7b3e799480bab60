"""The conversions admin: read-only lists with their money and CSV, each order's explanation, the dashboard and
partner page panels, and who may see them.

The clock is fixed at 2026-11-22 09:00 (Shanghai). The orders, their events and ledger entries are written
with the models (as the consumer would write them), on the tree A ─ A1 ─ A1a, A ─ A2, and B:

- SO-1, CNY, attributed to A1a by a page view, paid yesterday 129.99, 30.00 refunded this morning; 500 bp,
  chain A1a 8000 / A1 1500 / A 500. Commission 12,999 × 5% = 649.95 → 650: 520 / 97.5 → 98 (the tie goes to
  the partner closer to the order) / 32.5 → 32; after the refund 9,999 → 499.95 → 500: 400 / 75 / 25, so
  entries of −120 / −23 / −7.
- SO-2, USD 19.99 at 7.1234 (valid from 11-01) = 142.396766 → 142.40 CNY, explicit partner B, paid today;
  500 bp, chain B 10000: 712.
- SO-3, JPY 1,500 at 0.0482 = 72.30 CNY, no partner, paid today.
- SO-4, CNY 50.00, A2 by a view, paid today and cancelled; 300 bp, chain A2 8500 / A 1500: 150 → 127.5 → 128
  and 22.5 → 22, then −128 / −22.
"""

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from conversions.models import ExchangeRate, HeldRefund, LedgerEntry, Order, OrderEvent, Statement
from tests.factories import at, create_staff, create_tree

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-22T09:00:00+08:00", tick=False)]

YESTERDAY, TODAY = dt.date(2026, 11, 21), dt.date(2026, 11, 22)


def make_order(
    order_id, *, partner, openid, currency, amount, reporting, paid_at, chain, bp, **extra
) -> Order:
    return Order.objects.create(
        order_id=order_id,
        openid=openid,
        partner=partner,
        path=partner.path if partner else "",
        attribution=extra.pop("attribution", "view" if partner else "none"),
        commission_bp=bp,
        chain=[{"partner": p.pk, "share_bp": share} for p, share in chain],
        currency=currency,
        amount=amount,
        rate=extra.pop("rate", Decimal(1)),
        rate_valid_from=extra.pop("rate_valid_from", paid_at.date()),
        amount_reporting=reporting,
        paid_event_id=f"{order_id}-paid",
        paid_at=paid_at,
        paid_date=paid_at.date(),
        **extra,
    )


def event(order, suffix, status, ts, amount, reporting) -> OrderEvent:
    return OrderEvent.objects.create(
        event_id=f"{order.order_id}-{suffix}",
        order=order,
        status=status,
        ts=ts,
        date=ts.date(),
        amount=amount,
        amount_reporting=reporting,
    )


def entries(order, source, ts, reason, amounts) -> None:
    for partner, share_bp, amount in amounts:
        LedgerEntry.objects.create(
            order=order,
            partner=partner,
            amount=amount,
            reason=reason,
            share_bp=share_bp,
            source_event_id=source.event_id,
            event_ts=ts,
            event_date=ts.date(),
            booked_date=ts.date(),
        )


@pytest.fixture
def orders():
    tree = create_tree()
    a, a1, a1a, a2, b = (tree[code] for code in ("A", "A1", "A1a", "A2", "B"))
    ExchangeRate.objects.create(currency="USD", valid_from=dt.date(2026, 11, 1), rate=Decimal("7.1234"))
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 1), rate=Decimal("0.0482"))
    noon, morning = at("2026-11-21 12:00"), at("2026-11-22 08:00")

    so1 = make_order(
        "SO-1",
        partner=a1a,
        openid="o-buyer-one",
        currency="CNY",
        amount=12999,
        reporting=12999,
        paid_at=noon,
        chain=[(a1a, 8000), (a1, 1500), (a, 500)],
        bp=500,
        view_event_id="e-view-1",
        view_ts=at("2026-11-20 18:30"),
        view_url="/landing?id=3",
    )
    paid = event(so1, "paid", "paid", noon, 12999, 12999)
    entries(so1, paid, noon, "commission", [(a1a, 8000, 520), (a1, 1500, 98), (a, 500, 32)])
    refund = event(so1, "r1", "refunded", morning, 3000, 3000)
    entries(so1, refund, morning, "refund", [(a1a, 8000, -120), (a1, 1500, -23), (a, 500, -7)])

    so2 = make_order(
        "SO-2",
        partner=b,
        openid="o-buyer-two",
        currency="USD",
        amount=1999,
        reporting=14240,
        paid_at=at("2026-11-22 07:00"),
        chain=[(b, 10000)],
        bp=500,
        attribution="explicit",
        rate=Decimal("7.1234"),
        rate_valid_from=dt.date(2026, 11, 1),
    )
    paid = event(so2, "paid", "paid", at("2026-11-22 07:00"), 1999, 14240)
    entries(so2, paid, at("2026-11-22 07:00"), "commission", [(b, 10000, 712)])

    so3 = make_order(
        "SO-3",
        partner=None,
        openid="o-buyer-three",
        currency="JPY",
        amount=1500,
        reporting=7230,
        paid_at=at("2026-11-22 07:30"),
        chain=[],
        bp=0,
        rate=Decimal("0.0482"),
        rate_valid_from=dt.date(2026, 11, 1),
    )
    event(so3, "paid", "paid", at("2026-11-22 07:30"), 1500, 7230)

    so4 = make_order(
        "SO-4",
        partner=a2,
        openid="o-buyer-two",
        currency="CNY",
        amount=5000,
        reporting=5000,
        paid_at=at("2026-11-22 07:40"),
        chain=[(a2, 8500), (a, 1500)],
        bp=300,
    )
    paid = event(so4, "paid", "paid", at("2026-11-22 07:40"), 5000, 5000)
    entries(so4, paid, at("2026-11-22 07:40"), "commission", [(a2, 8500, 128), (a, 1500, 22)])
    cancel = event(so4, "c", "cancelled", at("2026-11-22 08:10"), 5000, 5000)
    entries(so4, cancel, at("2026-11-22 08:10"), "cancellation", [(a2, 8500, -128), (a, 1500, -22)])

    Statement.objects.create(partner=a, month=dt.date(2026, 10, 1), amount=1234567, rows=3)
    Statement.objects.create(partner=b, month=dt.date(2026, 10, 1), amount=-500, rows=1)
    Statement.objects.create(partner=b, month=dt.date(2026, 9, 1), amount=800, rows=2)
    return tree


def boss_client(language: str = "en") -> Client:
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client(headers={"accept-language": language})
    client.login(username="boss", password="pw")
    return client


def cells(html: str, css: str) -> list[str]:
    """The text of every ``<td class="field-...">`` of a change list, in order."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(rf'<td class="{css}">(.*?)</td>', html)]


def test_the_order_list_shows_each_orders_money_in_its_currency_and_the_reporting_one(orders):
    html = boss_client().get("/admin/conversions/order/?o=1").content.decode()
    assert cells(html, "field-order_link") == ["SO-1", "SO-2", "SO-3", "SO-4"]
    assert cells(html, "field-amount_column") == ["129.99 CNY", "19.99 USD", "1,500 JPY", "50.00 CNY"]
    assert cells(html, "field-refunded_column") == ["30.00 CNY", "—", "—", "50.00 CNY"]
    assert cells(html, "field-reporting_column") == ["129.99 CNY", "142.40 CNY", "72.30 CNY", "50.00 CNY"]
    assert cells(html, "field-commission_column") == ["5.00 CNY", "7.12 CNY", "0.00 CNY", "0.00 CNY"]
    assert cells(html, "field-status_column") == ["partly refunded", "paid", "paid", "cancelled"]
    assert "o-buyer" not in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("partner=B", ["SO-2"]),
        ("partner=A1a", ["SO-1"]),
        ("status=partly_refunded", ["SO-1"]),
        ("status=cancelled", ["SO-4"]),
        ("status=paid", ["SO-2", "SO-3"]),
        ("currency__exact=USD", ["SO-2"]),
        ("attribution__exact=none", ["SO-3"]),
        ("attribution__exact=explicit", ["SO-2"]),
        ("paid_date__gte=2026-11-21&paid_date__lte=2026-11-21", ["SO-1"]),
        ("paid_date__gte=2026-11-22", ["SO-2", "SO-3", "SO-4"]),
        ("q=SO-3", ["SO-3"]),
        ("q=SO", []),  # the order id exactly, not a part of it
    ],
)
def test_the_order_list_filters(orders, query, expected):
    html = boss_client().get(f"/admin/conversions/order/?o=1&{query}").content.decode()
    assert cells(html, "field-order_link") == expected


def test_the_order_csv_holds_integers_in_minor_units_with_their_currencies(orders):
    response = boss_client().get("/admin/conversions/order/export.csv?o=1&paid_date__gte=2026-11-21")
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode("utf-8-sig")
    assert body.splitlines() == [
        "order id,paid at,paid on,partner code,attribution,status,currency,amount paid (minor units),"
        'refunded (minor units),reporting currency,"amount paid, reporting currency (minor units)",'
        '"refunded, reporting currency (minor units)","commission, reporting currency (minor units)"',
        "SO-1,2026-11-21T12:00:00+08:00,2026-11-21,A1a,view,partly_refunded,CNY,12999,3000,CNY,12999,3000,500",
        "SO-2,2026-11-22T07:00:00+08:00,2026-11-22,B,explicit,paid,USD,1999,0,CNY,14240,0,712",
        "SO-3,2026-11-22T07:30:00+08:00,2026-11-22,,none,paid,JPY,1500,0,CNY,7230,0,0",
        "SO-4,2026-11-22T07:40:00+08:00,2026-11-22,A2,view,cancelled,CNY,5000,5000,CNY,5000,5000,0",
    ]


def test_the_statement_list_and_its_csv_what_finance_pays_from(orders):
    client = boss_client()
    html = client.get("/admin/conversions/statement/?month=2026-10").content.decode()
    assert cells(html, "field-partner_column") == ["A", "B"]
    assert cells(html, "field-amount_column") == ["12,345.67 CNY", "-5.00 CNY"]
    response = client.get("/admin/conversions/statement/export.csv?month=2026-10")
    lines = b"".join(response.streaming_content).decode("utf-8-sig").splitlines()
    assert [line.rsplit(",", 1)[0] for line in lines] == [
        "month,partner code,partner name,currency,amount (minor units),ledger entries,held amount (minor units),"
        "held entries,released amount (minor units),released entries,reversed amount (minor units),"
        "reversed entries",
        "2026-10,A,Partner A,CNY,1234567,3,0,0,0,0,0,0",
        "2026-10,B,Partner B,CNY,-500,1,0,0,0,0,0,0",
    ]


def test_the_ledger_list_filters_by_partner_day_and_reason(orders):
    client = boss_client()
    html = client.get("/admin/conversions/ledgerentry/?partner=A").content.decode()
    assert sorted(cells(html, "field-amount_column")) == ["-0.07 CNY", "-0.22 CNY", "0.22 CNY", "0.32 CNY"]
    html = client.get(
        "/admin/conversions/ledgerentry/?reason__exact=refund&booked_date__gte=2026-11-22"
    ).content
    assert sorted(cells(html.decode(), "field-amount_column")) == ["-0.07 CNY", "-0.23 CNY", "-1.20 CNY"]
    response = client.get("/admin/conversions/ledgerentry/export.csv?partner=B")
    lines = b"".join(response.streaming_content).decode("utf-8-sig").splitlines()
    assert (
        lines[1]
        == "2026-11-22,B,SO-2,commission,CNY,712,10000,2026-11-22,2026-11-22T07:00:00+08:00,SO-2-paid"
    )


def test_nothing_is_editable(orders):
    client = boss_client()
    order = Order.objects.get(order_id="SO-1")
    assert client.get("/admin/conversions/order/add/").status_code == 403
    assert client.post(f"/admin/conversions/order/{order.pk}/delete/").status_code == 403
    for model in ("ledgerentry", "statement", "exchangerate", "heldrefund", "monthclose"):
        assert client.get(f"/admin/conversions/{model}/").status_code == 200, model
        assert client.get(f"/admin/conversions/{model}/add/").status_code == 403, model


def explanation(client: Client, order_id: str) -> str:
    order = Order.objects.get(order_id=order_id)
    html = client.get(f"/admin/conversions/order/{order.pk}/change/").content.decode()
    return re.sub(r"\s+", " ", html)


def test_the_explanation_shows_the_sum_behind_every_ledger_entry(orders):
    html = explanation(boss_client(), "SO-1")
    # The attributing view, the chain and the rate of that moment.
    assert '<dd id="view-event">e-view-1</dd>' in html
    assert "/landing?id=3" in html
    assert "Commission rate at the order: 500 bp of the net amount." in html
    # The payment: the commission and its split, the tie of 97.5 and 32.5 going to A1, closer to the order.
    assert '<dd class="net">12,999</dd>' in html
    assert "12,999 × 500 bp ÷ 10,000 = 649.95 → 650" in html
    assert "650 × 8,000 bp ÷ 10,000 = 520 → 520" in html
    assert "650 × 1,500 bp ÷ 10,000 = 97.5 → 98" in html
    assert "650 × 500 bp ÷ 10,000 = 32.5 → 32" in html
    # The refund: the new net, the new commission, each entry as the difference.
    assert "12,999 − 3,000 = 9,999" in html
    assert "9,999 × 500 bp ÷ 10,000 = 499.95 → 500" in html
    assert "400 − 520 = -120" in html and "75 − 98 = -23" in html and "25 − 32 = -7" in html
    assert "✗" not in html
    assert '<td id="ledger-total">500</td>' in html
    # The buyer: a keyed hash, never the openid.
    assert "o-buyer-one" not in html
    assert '<dd id="order-buyer"' in html


def test_the_explanation_converts_each_event_at_the_orders_rate(orders):
    html = explanation(boss_client(), "SO-2")
    assert "The order named its partner itself (a link or a coupon): B." in html
    assert "1 USD = 7.1234 CNY, the rate valid from 2026-11-01" in html
    assert "19.99 USD × 7.1234 = 142.396766 → 142.40 CNY" in html
    assert "14,240 × 500 bp ÷ 10,000 = 712 → 712" in html


def test_the_explanation_of_a_cancellation_and_of_an_order_without_a_partner(orders):
    client = boss_client()
    html = explanation(client, "SO-4")
    # A two-level chain: the missing grandparent's share went to A2 (8,500 bp).
    assert "150 × 8,500 bp ÷ 10,000 = 127.5 → 128" in html
    assert "150 × 1,500 bp ÷ 10,000 = 22.5 → 22" in html
    assert "5,000 − 5,000 = 0" in html and "0 × 300 bp ÷ 10,000 = 0 → 0" in html
    assert "0 − 128 = -128" in html and "0 − 22 = -22" in html
    assert '<dd id="order-status">cancelled</dd>' in html
    html = explanation(client, "SO-3")
    assert "No partner: the order named none" in html
    assert "1,500 JPY × 0.0482 = 72.3 → 72.30 CNY" in html
    assert '<td id="ledger-total">0</td>' in html


def test_a_missing_orders_page_goes_back_to_the_admin_index_saying_so(orders):
    response = boss_client().get("/admin/conversions/order/999999/change/", follow=True)
    assert response.redirect_chain == [("/admin/", 302)]
    assert "Order with ID “999999” doesn’t exist. Perhaps it was deleted?" in response.content.decode()


def test_the_explanation_flags_an_entry_that_differs_from_its_sum(orders):
    LedgerEntry.objects.filter(source_event_id="SO-2-paid").update(amount=713)
    html = explanation(boss_client(), "SO-2")
    assert "✗ differs from the sum" in html


def test_the_explanation_in_chinese(orders):
    html = explanation(boss_client("zh-hans"), "SO-1")
    assert "<h2>归因</h2>" in html and "<dt>佣金</dt>" in html
    assert "下单时的佣金率：净额的 500 基点。" in html
    assert "9,999 × 500 bp ÷ 10,000 = 499.95 → 500" in html


def test_the_dashboard_shows_todays_orders_net_and_commission_for_its_partner_and_scope(orders):
    client = boss_client()

    def today(query: str) -> tuple[str, str, str, str]:
        html = client.get(f"/admin/?{query}").content.decode()
        return tuple(
            re.search(rf'id="today-{key}">([^<]*)<', html).group(1)
            for key in ("orders", "buyers", "net", "commission")
        )

    # All traffic: SO-2, SO-3 and SO-4 paid today by two buyers; 264.70 paid less 80.00 refunded; the
    # entries dated today: -1.50 (SO-1's refund) + 7.12 + 1.50 - 1.50.
    assert today("") == ("3", "2", "184.70 CNY", "5.62 CNY")
    # Orders without a partner: SO-3, no commission.
    assert today("scope=self") == ("1", "1", "72.30 CNY", "0.00 CNY")
    # A's subtree: SO-4 paid today; refunds today of SO-1 and SO-4; A's own entries today: -0.07 + 0.22 - 0.22.
    assert today("partner=A") == ("1", "1", "-30.00 CNY", "-0.07 CNY")
    # A's own orders: none; its entries from its own orders: none.
    assert today("partner=A&scope=self") == ("0", "0", "0.00 CNY", "0.00 CNY")
    assert today("partner=B") == ("1", "1", "142.40 CNY", "7.12 CNY")


def test_the_dashboard_ranks_partners_by_net_and_charts_orders_per_day(orders):
    html = boss_client().get("/admin/?start=2026-11-21&end=2026-11-22").content.decode()
    ranked = re.findall(r'<tr data-partner="([^"]+)">.*?<td class="net">([^<]+)</td>', html, re.S)
    assert ranked == [("B", "142.40 CNY"), ("A1a", "99.99 CNY"), ("A2", "0.00 CNY")]
    chart = html[html.index('id="conversions-chart"') :]
    orders_points = re.findall(r'<g class="series pv" data-series="orders">(.*?)</g>', chart, re.S)[0]
    assert re.findall(r'data-value="(\d+)"', orders_points) == ["1", "3"]
    assert re.search(r'id="range-orders">([^<]*)<', html).group(1) == "4"


def test_the_partner_page_shows_each_child_with_totals_that_add_up(orders):
    html = boss_client().get("/admin/network/A/?start=2026-11-21&end=2026-11-22").content.decode()
    table = html[html.index('id="network-orders"') :]

    def row(code: str, total: bool = False) -> list[str]:
        start = table.index('id="network-orders-total"' if total else f'<tr data-partner="{code}"')
        cells_ = re.findall(r'<td class="[a-z]+"[^>]*>([^<]*)</td>', table[start:])[:6]
        return cells_

    assert row("A") == ["0", "0", "0.00 CNY", "0.00 CNY", "0.00 CNY", "0.00 CNY"]
    assert row("A1") == ["1", "1", "129.99 CNY", "30.00 CNY", "99.99 CNY", "5.00 CNY"]
    assert row("A2") == ["1", "1", "50.00 CNY", "50.00 CNY", "0.00 CNY", "0.00 CNY"]
    assert row("A", total=True) == ["2", "2", "179.99 CNY", "80.00 CNY", "99.99 CNY", "5.00 CNY"]
    # A's own earnings: 0.32 - 0.07 from SO-1, 0.22 - 0.22 from SO-4.
    assert "A itself earned 0.25 CNY in the range." in html


def give(user, *codenames: str) -> None:
    for codename in codenames:
        app, code = codename.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=code))


def test_staff_without_the_view_permission_are_refused_and_see_no_panel(orders):
    staff = create_staff()  # the statistics viewers: traffic, not money
    client = Client()
    client.login(username="staff", password="pw")
    order = Order.objects.get(order_id="SO-1")
    for url in (
        "/admin/conversions/order/",
        "/admin/conversions/order/export.csv",
        f"/admin/conversions/order/{order.pk}/change/",
        "/admin/conversions/ledgerentry/",
        "/admin/conversions/statement/export.csv",
    ):
        assert client.get(url).status_code == 403, url
    assert 'id="today-pv"' in client.get("/admin/").content.decode()
    assert 'id="today-orders"' not in client.get("/admin/").content.decode()
    assert 'id="network-orders"' not in client.get("/admin/network/A/").content.decode()

    give(staff, "conversions.view_order")
    client.login(username="staff", password="pw")
    assert client.get(f"/admin/conversions/order/{order.pk}/change/").status_code == 200
    assert 'id="today-orders"' in client.get("/admin/").content.decode()
    assert client.get("/admin/conversions/statement/").status_code == 403  # each list its own permission


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(moment, marks=pytest.mark.time_machine(moment, tick=False), id=moment[:16])
        for moment in ("2026-12-31T23:58:00+08:00", "2027-02-01T00:03:00+08:00", "2026-11-30T23:59:00+08:00")
    ],
)
def test_todays_panel_counts_the_business_day_of_the_clock(moment):
    """An order paid at the business day's first second is today's; one a second earlier is yesterday's."""
    midnight = dt.datetime.fromisoformat(moment).replace(hour=0, minute=0, second=0)
    for order_id, paid_at, amount in (
        ("SO-day", midnight, 1000),
        ("SO-eve", midnight - dt.timedelta(seconds=1), 7),
    ):
        order = make_order(
            order_id,
            partner=None,
            openid=order_id,
            currency="CNY",
            amount=amount,
            reporting=amount,
            paid_at=paid_at,
            chain=[],
            bp=0,
        )
        event(order, "paid", "paid", paid_at, amount, amount)
    html = boss_client().get("/admin/").content.decode()
    assert re.search(r'id="today-orders">([^<]*)<', html).group(1) == "1"
    assert re.search(r'id="today-net">([^<]*)<', html).group(1) == "10.00 CNY"


def test_a_held_refund_never_shows_the_buyer_its_raw_event_holds(orders):
    held = HeldRefund.objects.create(
        event_id="r-early",
        order_id="SO-9",
        status="refunded",
        ts=at("2026-11-22 08:00"),
        amount=250,
        currency="USD",
        payload='{"event_id": "r-early", "openid": "o-secret-buyer", "amount": 250}',
    )
    client = boss_client()
    listed = client.get("/admin/conversions/heldrefund/").content.decode()
    assert cells(listed, "field-amount_column") == ["2.50 USD"]
    page = client.get(f"/admin/conversions/heldrefund/{held.pk}/change/").content.decode()
    assert "r-early" in page
    assert "o-secret-buyer" not in listed + page


def test_a_panel_that_fails_is_left_out_and_the_dashboard_still_shows(orders, caplog):
    from stats.read import panels

    def broken(page) -> str:
        raise RuntimeError("no figures today")

    panels.register_dashboard_panel("broken", broken)
    try:
        response = boss_client().get("/admin/")
    finally:
        del panels._dashboard["broken"]
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="today-pv"' in html and 'id="today-orders"' in html
    assert "the panel broken could not be drawn" in caplog.text
