"""The statistics lists: totals of the filtered rows, the filters, and CSV exports that follow the filters."""

import pytest

from tests.admin.conftest import CLOCK
from tests.test_admin import result_rows

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]

DAILY = "/admin/stats/dailystat/"


def totals(html: str) -> dict[str, str]:
    import re

    table = html[html.index('id="totals"') : html.index("</table>", html.index('id="totals"'))]
    return dict(re.findall(r'<td class="total-(\w+)"[^>]*>([^<]*)</td>', table))


def test_totals_row_sums_pv_and_merges_uv_of_the_filtered_days(boss, two_days):
    html = boss.get(DAILY, {"date__gte": "2026-11-21", "date__lte": "2026-11-21"}).content.decode()
    assert len(result_rows(html, "pv")) == 5  # A, A1, A1a, B and the traffic with no partner
    # PV of the roots A 6, B 1 and no partner 2 (A1's 6 and A1a's 2 are inside A's 6, not beside it);
    # own PV 0 + 4 + 2 + 1 + 2; UV: u1 u2 u3 u4 u9 whoever counted them.
    assert totals(html) == {"pv": "9", "uv": "5", "pv_self": "9", "uv_self": "5", "bot_pv": "0"}
    assert "Total of the 5 filtered rows" in html


def test_totals_row_follows_level_parent_and_search(boss, two_days):
    level2 = boss.get(DAILY, {"partner__level__exact": "2"}).content.decode()
    assert sorted(result_rows(level2, "partner", "pv")) == [("A1 (Partner A1)", "6")]
    assert totals(level2)["pv"] == "6" and totals(level2)["uv"] == "4"
    children_of_a = boss.get(DAILY, {"parent": "A"}).content.decode()
    assert totals(children_of_a)["pv"] == "6"
    # A1 and its child A1a: A1's 6 holds A1a's 2.
    a1_and_child = boss.get(DAILY, {"q": "A1", "date__gte": "2026-11-21", "date__lte": "2026-11-21"})
    assert sorted(result_rows(a1_and_child.content.decode(), "pv")) == [("2",), ("6",)]
    assert totals(a1_and_child.content.decode())["pv"] == "6"
    searched = boss.get(DAILY, {"q": "A1a"}).content.decode()
    assert totals(searched) == {"pv": "2", "uv": "1", "pv_self": "2", "uv_self": "1", "bot_pv": "0"}
    reconciled = boss.get(DAILY, {"reconciled": "no"}).content.decode()
    assert result_rows(reconciled, "pv") == [] or totals(reconciled)["pv"] == "0"


def test_a_malformed_date_filter_is_the_change_lists_error_not_a_500(boss, two_days):
    response = boss.get(DAILY, {"date__gte": "2026-13-45"})
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def csv_of(client, url: str, params: dict | None = None) -> list[str]:
    response = client.get(url, params or {})
    assert response.status_code == 200
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content)
    assert body.startswith("\ufeff".encode())  # spreadsheets read the Chinese names as UTF-8
    return body.decode("utf-8-sig").splitlines()


def test_daily_csv_streams_the_filtered_rows(boss, two_days):
    lines = csv_of(boss, DAILY + "export.csv", {"date__gte": "2026-11-21", "partner__level__exact": "2"})
    assert lines[0] == "date,partner code,partner name,level,PV,UV,own PV,own UV,bot PV,reconciled at"
    assert [line.rsplit(",", 1)[0] for line in lines[1:]] == ["2026-11-21,A1,Partner A1,2,6,4,4,3,0"]
    assert lines[1].endswith(",2026-11-22T00:40:00+08:00")
    everything = csv_of(boss, DAILY + "export.csv")
    assert len(everything) == 1 + 5


def test_the_change_list_links_its_csv_with_the_same_filters(boss, two_days):
    html = boss.get(DAILY, {"partner__level__exact": "2"}).content.decode()
    assert 'href="/admin/stats/dailystat/export.csv?partner__level__exact=2"' in html


def test_bucket_drift_and_login_csvs(boss, two_days):
    from loginlog.services import login_record, sync_logins
    from tests.factories import at

    buckets = csv_of(boss, "/admin/stats/bucketstat/export.csv", {"q": "A1a"})
    assert buckets[0].startswith("bucket start,partner code,PV,own PV,bot PV")
    assert [line.split(",")[:5] for line in buckets[1:]] == [
        ["2026-11-21T12:00:00+08:00", "A1a", "2", "2", "0"]
    ]
    drift = csv_of(boss, "/admin/stats/reconciledrift/export.csv", {"q": "A1"})
    assert drift[0] == "date,partner code,realtime PV,exact PV,realtime UV,exact UV,reconciled at"
    assert sorted(line.rsplit(",", 1)[0] for line in drift[1:]) == [
        "2026-11-21,A1,6,6,4,4",
        "2026-11-21,A1a,2,2,1,1",
    ]
    login_record(user_type="client", user_id=1001, day=at("2026-11-03 10:00").date())
    login_record(user_type="client", user_id=1001, day=at("2026-11-21 10:00").date())
    sync_logins(now=at("2026-11-22 03:00"))
    logins = csv_of(boss, "/admin/loginlog/loginmonth/export.csv", {"user_type__exact": "client"})
    assert logins == ["user type,user id,month,days logged in", "client,1001,2026-11,3 21"]


def test_dead_letter_csv_and_an_unknown_filter(boss, two_days):
    from tests.factories import at, feed, pv_event

    feed([pv_event(at("2026-11-22 08:50"), "NOPE")], now=at("2026-11-22 08:50"))
    lines = csv_of(boss, "/admin/stats/deadletter/export.csv", {"reason__exact": "unknown_partner"})
    assert len(lines) == 2 and ",unknown_partner," in lines[1]
    assert boss.get("/admin/stats/deadletter/export.csv", {"nope__exact": "1"}).status_code == 302


def test_daily_csv_of_many_rows_reads_them_in_bounded_chunks(boss, settings):
    """A year of partners must not sit in memory: the export reads 2,000 rows per query, never all at once."""
    import datetime as dt

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from stats.models import DailyStat
    from tests.factories import create_partner

    partners = [create_partner(f"P{n:03d}") for n in range(25)]
    first = dt.date(2026, 1, 1)
    DailyStat.objects.bulk_create(
        [
            DailyStat(partner=p, date=first + dt.timedelta(days=d), pv=d + 1, uv=1)
            for d in range(200)
            for p in partners
        ],
        batch_size=1000,
    )  # 5,000 rows
    response = boss.get(DAILY + "export.csv", {"partner__level__exact": "1"})
    with CaptureQueriesContext(connection) as queries:
        body = b"".join(response.streaming_content).decode("utf-8-sig").splitlines()
    assert len(body) == 1 + 5000
    assert sum(int(line.split(",")[4]) for line in body[1:]) == 25 * sum(range(1, 201))
    reads = [q["sql"] for q in queries.captured_queries if "stats_dailystat" in q["sql"]]
    assert len(reads) == 3  # 2,000 + 2,000 + 1,000 rows
    assert all("LIMIT 2000" in sql for sql in reads)


def test_daily_csv_lists_the_rows_in_the_order_of_the_list_on_screen(boss, two_days):
    for params in ({}, {"o": "2"}, {"o": "-2.1"}, {"o": "1"}, {"o": "-7"}):
        screen = [pv for (pv,) in result_rows(boss.get(DAILY, params).content.decode(), "pv")]
        lines = csv_of(boss, DAILY + "export.csv", params)
        assert [line.split(",")[4] for line in lines[1:]] == screen, params
    # Sorted by PV, highest first: A and A1 (6 each; the newer row first), then A1a and no partner (2), B (1).
    by_pv = csv_of(boss, DAILY + "export.csv", {"o": "-2"})  # list_display[2]: PV
    assert [line.split(",")[4] for line in by_pv[1:]] == ["6", "6", "2", "2", "1"]


def test_csv_chunks_follow_an_ordering_with_ties_across_chunk_boundaries(boss):
    """2,300 rows sorted by PV with 23 rows per PV value: the 2,000-row chunk ends inside a tie."""
    import datetime as dt

    from stats.models import DailyStat
    from tests.factories import create_partner

    partners = [create_partner(f"P{n:03d}") for n in range(23)]
    first = dt.date(2026, 1, 1)
    DailyStat.objects.bulk_create(
        [
            DailyStat(partner=p, date=first + dt.timedelta(days=d), pv=(d * 7) % 100 + 1, uv=1)
            for d in range(100)
            for p in partners
        ]
    )
    rows = sorted(
        DailyStat.objects.values_list("pk", "date", "partner__code", "pv"), key=lambda r: (-r[3], -r[0])
    )
    expected = [f"{day.isoformat()},{code},{pv}" for _pk, day, code, pv in rows]
    lines = csv_of(boss, DAILY + "export.csv", {"o": "-2"})
    assert [",".join(line.split(",")[:2] + [line.split(",")[4]]) for line in lines[1:]] == expected


@pytest.mark.parametrize(
    "ordering", ["partner__code", "-partner__code", "-reconciled_at", "reconciled_at", "partner", "-partner"]
)
def test_keyset_chunks_give_the_rows_one_query_gives_nulls_included(two_days, ordering):
    from cpsproject.common.admin_csv import keyset_rows
    from partners.models import Partner
    from stats.models import DailyStat

    DailyStat.objects.filter(partner__code="B").update(reconciled_at=None)
    # A relation sorts by its model's ordering (the id path), which differs from its key's order once ids
    # cross a power of ten ("/10/" before "/9/"): give B, the newest root, the path that sorts first.
    Partner.objects.filter(code="B").update(path="/0/")
    queryset = DailyStat.objects.order_by(ordering, "pk")
    assert list(keyset_rows(queryset, ["partner__code", "pv"], chunk=2)) == list(
        queryset.values_list("partner__code", "pv")
    )
