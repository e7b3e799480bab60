"""An open traffic finding holds its partner-day's commissions from the statement; cleared releases them to the
next statement, confirmed reverses them with ledger entries. Every amount below is written from the entries.

Orders of November (commissions as ledger entries, fen):
  SO-1  A1 on Nov 5 (A1's flagged day):  A1 255, its upline A 45
  SO-2  A1 on Nov 6 (not flagged):        A1 510, A 90
  SO-3  B  on Nov 5 (B's flagged day):    B 300
  SO-4  A2 on Nov 5 (A2 is not flagged):  A2 100, A 20
December: SO-5  A1 on Dec 3:               A1 100, A 20
"""

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.test import Client
from rest_framework.test import APIClient

from conversions import ledger
from conversions.models import CommissionHold, LedgerEntry, Statement
from conversions.public import settle_review
from conversions.statements import close_month
from quality.models import Finding
from tests.conversions.builders import ledger as entry
from tests.conversions.builders import make_order
from tests.factories import at, create_staff, create_tree

pytestmark = pytest.mark.django_db

NOV, DEC = dt.date(2026, 11, 1), dt.date(2026, 12, 1)
FLAGGED = dt.date(2026, 11, 5)


def statements(month: dt.date) -> dict[str, dict[str, int]]:
    return {
        s.partner.code: {
            "amount": s.amount,
            "rows": s.rows,
            "held": s.held_amount,
            "held_rows": s.held_rows,
            "released": s.released_amount,
            "released_rows": s.released_rows,
            "reversed": s.reversed_amount,
            "reversed_rows": s.reversed_rows,
        }
        for s in Statement.objects.filter(month=month).select_related("partner")
    }


def figures(amount=0, rows=0, held=0, held_rows=0, released=0, released_rows=0, reversed=0, reversed_rows=0):
    return {
        "amount": amount,
        "rows": rows,
        "held": held,
        "held_rows": held_rows,
        "released": released,
        "released_rows": released_rows,
        "reversed": reversed,
        "reversed_rows": reversed_rows,
    }


def assert_every_entry_of_the_month_is_accounted_for(month: dt.date, end: dt.date) -> None:
    """Booked in the month = paid less released + held + reversed, per partner (amounts and rows)."""
    for statement in Statement.objects.filter(month=month):
        booked = LedgerEntry.objects.filter(
            partner=statement.partner, booked_date__gte=month, booked_date__lt=end
        )
        assert (booked.aggregate(total=Sum("amount"))["total"] or 0, booked.count()) == (
            statement.amount - statement.released_amount + statement.held_amount + statement.reversed_amount,
            statement.rows - statement.released_rows + statement.held_rows + statement.reversed_rows,
        ), statement.partner.code


@pytest.fixture
def november() -> dict:
    tree = create_tree()
    so1 = make_order("SO-1", partner=tree["A1"], paid_at=at("2026-11-05 10:00"), amount=10_000)
    entry(so1, tree["A1"], 255, ts=at("2026-11-05 10:00"), share_bp=8500)
    entry(so1, tree["A"], 45, ts=at("2026-11-05 10:00"), share_bp=1500)
    so2 = make_order("SO-2", partner=tree["A1"], paid_at=at("2026-11-06 10:00"), amount=20_000)
    entry(so2, tree["A1"], 510, ts=at("2026-11-06 10:00"), share_bp=8500)
    entry(so2, tree["A"], 90, ts=at("2026-11-06 10:00"), share_bp=1500)
    so3 = make_order("SO-3", partner=tree["B"], paid_at=at("2026-11-05 11:00"), amount=6_000)
    entry(so3, tree["B"], 300, ts=at("2026-11-05 11:00"))
    so4 = make_order("SO-4", partner=tree["A2"], paid_at=at("2026-11-05 12:00"), amount=4_000)
    entry(so4, tree["A2"], 100, ts=at("2026-11-05 12:00"), share_bp=8500)
    entry(so4, tree["A"], 20, ts=at("2026-11-05 12:00"), share_bp=1500)
    tree["a1_finding"] = Finding.objects.create(
        partner=tree["A1"], date=FLAGGED, rule="repeats", value=0.75, threshold=0.3
    )
    tree["b_finding"] = Finding.objects.create(
        partner=tree["B"], date=FLAGGED, rule="automated", value=0.9, threshold=0.2
    )
    return tree


def december(tree: dict) -> None:
    so5 = make_order("SO-5", partner=tree["A1"], paid_at=at("2026-12-03 10:00"), amount=4_000)
    entry(so5, tree["A1"], 100, ts=at("2026-12-03 10:00"), share_bp=8500)
    entry(so5, tree["A"], 20, ts=at("2026-12-03 10:00"), share_bp=1500)


def resolve(finding: Finding, status: str, when: str) -> None:
    Finding.objects.filter(pk=finding.pk).update(status=status, reason="looked at it", resolved_at=at(when))


def test_open_findings_hold_then_cleared_is_paid_next_month_and_confirmed_is_reversed(november):
    closed = close_month(month=NOV, now=at("2026-12-08 00:00"))
    assert closed.summary() == (
        "2026-11 closed: 4 statements, 4 ledger entries, amount 720 (minor units of CNY), "
        "held 600 in 3 ledger entries"
    )
    # A1's Nov 5 order held with its upline's share; A2's order of the same day and A1's of Nov 6 are paid.
    nov = {
        "A1": figures(amount=510, rows=1, held=255, held_rows=1),
        "A": figures(amount=110, rows=2, held=45, held_rows=1),
        "A2": figures(amount=100, rows=1),
        "B": figures(held=300, held_rows=1),
    }
    assert statements(NOV) == nov
    assert_every_entry_of_the_month_is_accounted_for(NOV, DEC)

    december(november)
    resolve(november["a1_finding"], "cleared", "2026-12-09 10:00")
    resolve(november["b_finding"], "confirmed", "2026-12-10 10:00")
    assert settle_review(partner_id=november["B"].pk, day=FLAGGED, now=at("2026-12-10 10:00")) == 1
    assert settle_review(partner_id=november["B"].pk, day=FLAGGED, now=at("2026-12-10 10:05")) == 0  # once
    assert (
        settle_review(partner_id=november["A1"].pk, day=FLAGGED, now=at("2026-12-10 10:05")) == 0
    )  # cleared
    # The reversal: B's 300 negated, saying which finding, booked on the first open day; nothing deleted.
    so3 = LedgerEntry.objects.filter(order__order_id="SO-3").order_by("id")
    original, reversal = so3
    assert (reversal.amount, reversal.reason, reversal.booked_date, reversal.event_date) == (
        -300,
        "quality_reversal",
        dt.date(2026, 12, 10),
        dt.date(2026, 12, 10),
    )
    assert reversal.source_event_id == f"quality-finding-{november['b_finding'].pk}/reverses/{original.pk}"
    assert original.hold.reversal_id == reversal.pk and original.hold.held_from == NOV

    close_month(month=DEC, now=at("2027-01-08 00:00"))
    assert statements(NOV) == nov  # a closed statement never changes
    assert statements(DEC) == {
        "A1": figures(amount=355, rows=2, released=255, released_rows=1),  # 100 of December + 255 released
        "A": figures(amount=65, rows=2, released=45, released_rows=1),
        "B": figures(reversed=-300, reversed_rows=1),  # never paid: held 300, reversed -300
    }
    assert_every_entry_of_the_month_is_accounted_for(DEC, dt.date(2027, 1, 1))
    paid = dict(
        Statement.objects.values("partner__code")
        .annotate(paid=Sum("amount"))
        .values_list("partner__code", "paid")
    )
    assert paid == {"A1": 865, "A": 175, "A2": 100, "B": 0}  # every commission of A1 and A once, B's none
    assert LedgerEntry.objects.count() == 10  # 9 commissions and 1 reversal


def test_a_finding_still_open_keeps_holding_and_a_withdrawn_one_releases(november):
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    close_month(month=DEC, now=at("2027-01-08 00:00"))
    # Still open in December: nothing released, nothing new held (December has no entries of those days).
    assert Statement.objects.filter(month=DEC).count() == 0
    november["a1_finding"].delete()  # the recount removed it: nothing to review any more
    resolve(november["b_finding"], "cleared", "2027-01-10 10:00")
    close_month(month=dt.date(2027, 1, 1), now=at("2027-02-08 00:00"))
    assert statements(dt.date(2027, 1, 1)) == {
        "A1": figures(amount=255, rows=1, released=255, released_rows=1),
        "A": figures(amount=45, rows=1, released=45, released_rows=1),
        "B": figures(amount=300, rows=1, released=300, released_rows=1),
    }
    assert set(CommissionHold.objects.values_list("released_in", flat=True)) == {dt.date(2027, 1, 1)}


def test_confirmed_before_the_close_is_reversed_in_its_month_and_never_paid(november):
    resolve(november["b_finding"], "confirmed", "2026-11-20 10:00")
    assert settle_review(partner_id=november["B"].pk, day=FLAGGED, now=at("2026-11-20 10:00")) == 1
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    assert statements(NOV)["B"] == figures(
        reversed=0, reversed_rows=2
    )  # 300 and its reversal, both November's
    assert statements(NOV)["A1"] == figures(amount=510, rows=1, held=255, held_rows=1)
    assert_every_entry_of_the_month_is_accounted_for(NOV, DEC)


def test_a_refund_after_the_confirmation_is_reversed_too_so_the_partner_is_neither_paid_nor_charged(november):
    b = november["B"]
    order = make_order("SO-6", partner=b, paid_at=at("2026-11-05 15:00"), amount=6_000, commission_bp=500)
    order.chain = [{"partner": b.pk, "share_bp": 10_000}]
    ledger.append_entries(ledger.commission_entries(order, closed=frozenset()))  # 300
    resolve(november["b_finding"], "confirmed", "2026-11-20 10:00")
    assert settle_review(partner_id=b.pk, day=FLAGGED, now=at("2026-11-20 10:00")) == 2  # SO-3 and SO-6
    # Half refunded after the confirmation: the difference leaves the reversals out (-150, not +150).
    ledger.append_entries(
        ledger.difference_entries(
            order,
            ledger.holdings([order])[order.pk],
            net_reporting=3_000,
            reason="refund",
            event_id="r-1",
            ts=at("2026-11-25 10:00"),
            closed=frozenset(),
        )
    )
    close_month(month=NOV, now=at("2026-12-08 00:00"))  # the close reverses the refund: +150 on Dec 8
    assert sorted(LedgerEntry.objects.filter(order=order).values_list("amount", "reason")) == [
        (-300, "quality_reversal"),
        (-150, "refund"),
        (150, "quality_reversal"),
        (300, "commission"),
    ]
    assert statements(NOV)["B"] == figures(
        reversed=-150, reversed_rows=5
    )  # 300-300+300-300-150; +150 is December's
    close_month(month=DEC, now=at("2027-01-08 00:00"))
    assert statements(DEC)["B"] == figures(reversed=150, reversed_rows=1)
    assert Statement.objects.filter(partner=b).aggregate(paid=Sum("amount"))["paid"] == 0


def test_a_finding_opened_after_its_month_was_paid_holds_nothing(november):
    Finding.objects.all().delete()
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    Finding.objects.create(partner=november["A1"], date=FLAGGED, rule="repeats", value=0.75, threshold=0.3)
    so1 = LedgerEntry.objects.filter(order__order_id="SO-1").first().order
    entry(so1, november["A1"], -255, ts=at("2026-12-02 10:00"), reason="refund")  # SO-1 refunded in December
    close_month(month=DEC, now=at("2027-01-08 00:00"))
    # SO-1 was paid in November: its refund is charged as usual, not held.
    assert statements(DEC) == {"A1": figures(amount=-255, rows=1)}


def test_confirming_in_the_admin_reverses_once_the_decision_commits(
    november, django_capture_on_commit_callbacks
):
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    user = create_staff("reviewer")
    user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    url = f"/admin/quality/finding/{november['b_finding'].pk}/change/"
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(url, {"status": "confirmed", "reason": "bot farm"}).status_code == 302
    assert list(
        LedgerEntry.objects.filter(partner=november["B"]).order_by("id").values_list("amount", "reason")
    ) == [(300, "commission"), (-300, "quality_reversal")]
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            client.post(
                f"/admin/quality/finding/{november['a1_finding'].pk}/change/",
                {"status": "cleared", "reason": "fine"},
            ).status_code
            == 302
        )
    assert not LedgerEntry.objects.filter(reason="quality_reversal", partner=november["A1"]).exists()


def test_the_api_and_the_admin_show_what_was_held_released_and_reversed(november):
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    resolve(november["a1_finding"], "cleared", "2026-12-09 10:00")
    close_month(month=DEC, now=at("2027-01-08 00:00"))
    client = APIClient()
    client.force_login(_superuser())
    body = client.get("/api/v1/partners/A1/statements/").json()
    assert [
        (
            s["month"],
            s["amount"],
            s["rows"],
            s["held_amount"],
            s["held_rows"],
            s["released_amount"],
            s["released_rows"],
        )
        for s in body
    ] == [("2026-12", 255, 1, 0, 0, 255, 1), ("2026-11", 510, 1, 255, 1, 0, 0)]
    entries = client.get("/api/v1/partners/A1/statements/?month=2026-11").json()["results"]
    assert [(e["order_id"], e["amount"], e["paid_in"]) for e in entries] == [
        ("SO-1", 255, "2026-12"),  # held in November, released into December
        ("SO-2", 510, "2026-11"),
    ]
    csv = (
        b"".join(client.get("/api/v1/partners/A1/statements/?format=csv").streaming_content)
        .decode()
        .splitlines()
    )
    assert csv[0].endswith(
        ",held_amount,held_rows,released_amount,released_rows,reversed_amount,reversed_rows"
    )
    assert csv[2].startswith("A1,2026-11,510,1,") and csv[2].endswith(",255,1,0,0,0,0")
    # A still-held entry is paid nowhere yet.
    b_entries = client.get("/api/v1/partners/B/statements/?month=2026-11").json()["results"]
    assert [(e["amount"], e["paid_in"]) for e in b_entries] == [(300, None)]

    admin = Client()
    admin.force_login(User.objects.get(username="auditor"))
    page = admin.get("/admin/conversions/statement/?month=2026-11").content.decode()
    assert "held for review: 2.55 CNY (1)" in page  # A1's November: 255 held
    chinese = admin.get("/admin/conversions/statement/?month=2026-11", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "流量审核" in chinese.content.decode() and "审核暂扣: 2.55 CNY (1)" in chinese.content.decode()
    holds = admin.get("/admin/conversions/commissionhold/").content.decode()
    assert "SO-1" in holds and "SO-3" in holds and "quality-finding-" in holds


def _superuser():
    user = create_staff("auditor")
    user.is_superuser = True
    user.save()
    return user


def test_one_confirmed_finding_of_a_day_reverses_even_while_another_is_open(november):
    # The later finding (listed after the open one) is the confirmed one.
    bots = Finding.objects.create(
        partner=november["A1"], date=FLAGGED, rule="automated", value=0.5, threshold=0.2
    )
    resolve(bots, "confirmed", "2026-11-20 10:00")
    close_month(month=NOV, now=at("2026-12-08 00:00"))  # the close reverses it: no callback ran
    assert statements(NOV)["A1"] == figures(amount=510, rows=1, reversed=255, reversed_rows=1)
    assert statements(NOV)["A"] == figures(amount=110, rows=2, reversed=45, reversed_rows=1)
    reversals = LedgerEntry.objects.filter(reason="quality_reversal").order_by("amount")
    assert [(r.partner.code, r.amount, r.booked_date) for r in reversals] == [
        ("A1", -255, dt.date(2026, 12, 8)),
        ("A", -45, dt.date(2026, 12, 8)),
    ]
    assert [r.source_event_id.split("/")[0] for r in reversals] == [f"quality-finding-{bots.pk}"] * 2
