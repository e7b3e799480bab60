"""The traffic to review in the admin: the list, a finding's evidence, resolving it with a reason, who and when."""

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from quality.models import Finding, QualityDay
from tests.factories import at, create_staff, create_tree

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-22T09:00:00+08:00", tick=False)]

DAY = dt.date(2026, 11, 21)


@pytest.fixture
def finding() -> Finding:
    tree = create_tree()
    QualityDay.objects.create(
        partner=tree["A1"],
        date=DAY,
        pv=400,
        repeat_pv=300,
        addressed_pv=400,
        distinct_ips=1,
        distinct_networks=1,
        top_addresses=[["203.0.113.7", 400]],
        top_addresses_pv=400,
    )
    return Finding.objects.create(partner=tree["A1"], date=DAY, rule="repeats", value=0.75, threshold=0.3)


def reviewer(*, can_resolve: bool = True) -> Client:
    user = create_staff("reviewer")
    if can_resolve:
        user.user_permissions.add(Permission.objects.get(codename="change_finding"))
    client = Client()
    client.force_login(user)
    return client


def test_the_list_shows_the_traffic_to_review_and_the_evidence(finding):
    client = reviewer(can_resolve=False)
    listing = client.get("/admin/quality/finding/").content.decode()
    # Shares read as percentages, the threshold with the side that breaks it.
    assert '<td class="field-value_column">75%</td>' in listing
    assert '<td class="field-threshold_column">&gt; 30%</td>' in listing
    page = client.get(f"/admin/quality/finding/{finding.pk}/change/").content.decode()
    assert "400 views: 0 automated (0%), 300 repeats (75%), 0 from listed networks (0%)" in page
    assert "busiest addresses (100% of the views with an address): 203.0.113.7 (400)" in page
    # A viewer reads; only the change permission resolves.
    assert (
        client.post(f"/admin/quality/finding/{finding.pk}/change/", {"status": "cleared"}).status_code == 403
    )


def test_resolving_needs_a_reason_and_keeps_who_and_when(finding):
    client = reviewer()
    url = f"/admin/quality/finding/{finding.pk}/change/"
    refused = client.post(url, {"status": "confirmed", "reason": "  "})
    assert (
        refused.status_code == 200
        and "Say why the finding is cleared or confirmed." in refused.content.decode()
    )
    finding.refresh_from_db()
    assert finding.status == "open"

    assert client.post(url, {"status": "confirmed", "reason": "one machine reloading"}).status_code == 302
    finding.refresh_from_db()
    assert (finding.status, finding.reason, finding.resolved_by.username) == (
        "confirmed",
        "one machine reloading",
        "reviewer",
    )
    assert finding.resolved_at == at("2026-11-22 09:00")
    # Decided once: a second post changes nothing.
    client.post(url, {"status": "cleared", "reason": "changed my mind"})
    finding.refresh_from_db()
    assert (finding.status, finding.reason) == ("confirmed", "one machine reloading")


def test_the_findings_download_as_csv(finding):
    client = reviewer(can_resolve=False)
    response = client.get("/admin/quality/finding/export.csv")
    body = b"".join(response.streaming_content).decode("utf-8-sig")
    assert body.splitlines()[:2] == [
        "partner,date,rule,value,threshold,status,resolved_by,resolved_at,reason",
        "A1,2026-11-21,repeats,0.75,0.3,open,,,",
    ]


def test_the_review_page_speaks_chinese(finding):
    client = reviewer(can_resolve=False)
    listing = client.get("/admin/quality/finding/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "待审核流量" in listing and "重复浏览" in listing and "待审核" in listing
    page = client.get(f"/admin/quality/finding/{finding.pk}/change/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "400 次浏览：0 次自动化（0%），300 次重复（75%）" in page.content.decode()


def test_the_partner_page_shows_the_days_signals_beside_their_findings_and_evidence(finding):
    QualityDay.objects.filter(date=DAY).update(orders=3, orders_by_view=3, order_seconds=[3, 0, 0, 0, 0, 0])
    QualityDay.objects.filter(date=DAY).update(median_seconds_to_order=4.0)
    client = reviewer(can_resolve=False)
    page = client.get("/admin/network/A1/?start=2026-11-21&end=2026-11-21").content.decode()
    start = page.index('id="quality-days"')
    table = page[start : page.index("</section>", start)]
    assert '<tr data-date="2026-11-21">' in table
    assert '<td class="pv">400</td>' in table and '<td class="top-share">100%</td>' in table
    assert '<td class="repeats">300<span class="share">75%</span></td>' in table
    assert (
        'repeat views</a> <span class="measure">75% (&gt; 30%)</span> <span class="status">· open</span>'
        in table
    )
    assert '<td>203.0.113.7</td><td class="num">400</td><td class="num">100%</td>' in table
    assert "<th>under 10 s</th><th>10 s to 1 min</th>" in table and '<td class="num">3</td>' in table
    # Without the quality permissions, no panel.
    outsider = create_staff("outsider", viewer=False)
    outsider.user_permissions.add(*Permission.objects.filter(codename__in=["view_dailystat", "view_partner"]))
    other = Client()
    other.force_login(outsider)
    assert 'id="quality-days"' not in other.get("/admin/network/A1/").content.decode()


def test_the_dashboard_panel_says_when_there_is_nothing_to_review(finding):
    client = reviewer(can_resolve=False)
    panel = client.get("/admin/").content.decode()
    assert 'data-partner="A1"' in panel and "repeat views" in panel  # the partner and the rule it broke
    Finding.objects.update(status="cleared", reason="a campaign")
    panel = client.get("/admin/").content.decode()
    assert "0 findings to review" in panel and 'id="quality-worst"' not in panel
    assert "No partner's traffic waits for review." in panel
    chinese = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "没有待审核的导流商流量。" in chinese
