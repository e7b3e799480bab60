"""The partner admin: partners are deactivated, never deleted, and found by code or name in every list."""

import re
from html import unescape

import pytest

from partners.models import Partner
from stats.models import DailyStat
from tests.admin.conftest import CLOCK
from tests.test_admin import result_rows

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]


def test_delete_explains_that_partners_are_deactivated_and_offers_that(boss, two_days):
    a = two_days["A"]
    page = boss.get(f"/admin/partners/partner/{a.pk}/delete/")
    assert page.status_code == 200
    text = unescape(re.search(r'<p id="not-deleted">(.*?)</p>', page.content.decode(), re.S).group(1))
    assert text == (
        "Partners are deactivated, not deleted: deleting A (Partner A) would delete its statistics (1 day) and "
        "every sub-partner with theirs. A deactivated partner keeps its statistics and its place in the tree; "
        "its new events become dead letters (inactive partner) until it is activated again."
    )
    assert 'value="Deactivate A"' in page.content.decode()
    assert "Deactivate its 3 sub-partners too" in page.content.decode()
    done = boss.post(f"/admin/partners/partner/{a.pk}/delete/", follow=True)
    assert done.redirect_chain == [(f"/admin/partners/partner/{a.pk}/change/", 302)]
    assert "A deactivated (1 partner): its statistics are kept" in unescape(done.content.decode())
    assert dict(Partner.objects.values_list("code", "is_active")) == {
        "A": False,
        "A1": True,
        "A1a": True,
        "A2": True,
        "B": True,
    }
    assert DailyStat.objects.filter(partner__code="A").count() == 1  # kept


def test_deactivating_with_the_subtree_deactivates_every_descendant(boss, two_days):
    boss.post(f"/admin/partners/partner/{two_days['A1'].pk}/delete/", {"subtree": "1"})
    inactive = set(Partner.objects.filter(is_active=False).values_list("code", flat=True))
    assert inactive == {"A1", "A1a"}


def test_the_partner_list_offers_deactivation_not_deletion(boss, two_days):
    html = boss.get("/admin/partners/partner/").content.decode()
    assert 'value="deactivate_selected"' in html and 'value="delete_selected"' not in html
    ids = [two_days["A2"].pk, two_days["B"].pk]
    boss.post(
        "/admin/partners/partner/", {"action": "deactivate_selected", "_selected_action": ids}, follow=True
    )
    assert set(Partner.objects.filter(is_active=False).values_list("code", flat=True)) == {"A2", "B"}
    assert Partner.objects.count() == 5


@pytest.mark.parametrize(
    ("url", "column", "expected"),
    [
        ("/admin/partners/partner/", "code", [("A1a",)]),
        ("/admin/stats/dailystat/", "pv", [("2",)]),
        ("/admin/stats/bucketstat/", "pv", [("2",)]),
        ("/admin/stats/reconciledrift/", "exact_pv", [("2",)]),
    ],
)
def test_every_partner_list_finds_a_partner_by_name(boss, two_days, url, column, expected):
    html = boss.get(url, {"q": "Partner A1a"}).content.decode()
    assert result_rows(html, column) == expected
