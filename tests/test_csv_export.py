"""The shared streaming CSV writer (cpsproject.common.csv_export) and the API's ``?format=csv`` answers."""

import csv
import datetime as dt
import io
import tracemalloc
from collections.abc import Iterator

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.csv_export import BOM, csv_lines, csv_response
from cpsproject.common.timeutil import local_day
from loginlog.bitmaps import queue_login
from tests.factories import at, create_tree, feed, pv_event, staff_client

HEADER = ["date", "partner", "pv", "uv"]


def year_of_partners(days: int, partners: int) -> Iterator[tuple]:
    """``days`` × ``partners`` rows made one at a time, as ``values_list(...).iterator()`` gives them."""
    first = dt.date(2026, 1, 1)
    for d in range(days):
        day = (first + dt.timedelta(days=d)).isoformat()
        for p in range(partners):
            yield (day, f"P{p:04d}", d * 1000 + p, p)


def peak_streaming(days: int, partners: int) -> tuple[int, int]:
    """Stream a CSV response of that many rows to nowhere; return (bytes sent, peak traced memory)."""
    tracemalloc.start()
    try:
        response = csv_response(year_of_partners(days, partners), header=HEADER, filename="x.csv", bom=True)
        sent = sum(len(chunk) for chunk in response.streaming_content)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return sent, peak


def test_memory_stays_flat_as_rows_grow_from_ten_thousand_to_365_thousand():
    small_bytes, small_peak = peak_streaming(100, 100)
    large_bytes, large_peak = peak_streaming(365, 1000)
    assert large_bytes > 30 * small_bytes > 0  # 36.5 times the rows
    # One 64 KB chunk and one row in memory at a time, whatever the number of rows.
    assert large_peak < 1.5 * small_peak + 32 * 1024, (small_peak, large_peak)
    assert large_peak < 1024 * 1024, large_peak


def test_the_lines_are_rfc4180_csv_with_the_header_first():
    rows = [("2026-11-21", "P001", 12, True), ("2026-11-22", 'Say "hi", please', None, False)]
    lines = list(csv_lines(rows, header=HEADER))
    assert lines == [
        b"date,partner,pv,uv\r\n",
        b"2026-11-21,P001,12,true\r\n",
        b'2026-11-22,"Say ""hi"", please",,false\r\n',
    ]


def test_the_excel_options_add_a_bom_and_defuse_formulas():
    rows = [('=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "华东渠道", -3)]
    data = b"".join(csv_lines(rows, header=["a", "b", "c", "d", "name", "n"], bom=True, excel_safe=True))
    assert data.startswith(BOM.encode())
    assert data.decode("utf-8-sig").splitlines() == [
        "a,b,c,d,name,n",
        '"\'=HYPERLINK(""http://x"")",\'+1,\'-2,\'@SUM(A1),华东渠道,-3',
    ]
    plain = b"".join(csv_lines([("=1",)], header=["a"]))
    assert plain == b"a\r\n=1\r\n"  # the API's CSV is data, not a spreadsheet: left as sent


# --- ?format=csv on the API ----------------------------------------------------------------------------------


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.streaming
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.django_db
@pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)
def test_each_stats_endpoint_answers_the_same_rows_as_csv():
    create_tree()
    half_past = at("2026-11-21 12:30")
    values = [pv_event(half_past, "A1a", u) for u in ("u1", "u2")]
    values += [pv_event(half_past, "B", u) for u in ("u3", "u4", "u5", "u6")] + [
        pv_event(half_past, "A2", "u7")
    ]
    feed(values, now=half_past)
    client = staff_client()
    stats = read_csv(client.get("/api/v1/partners/A/stats/?start=2026-11-20&end=2026-11-21&format=csv"))
    assert stats == [
        ["partner", "date", "pv", "uv", "pv_self", "uv_self", "reconciled"],
        ["A", "2026-11-20", "0", "0", "0", "0", "false"],
        ["A", "2026-11-21", "3", "3", "0", "0", "false"],
    ]
    buckets = read_csv(client.get("/api/v1/partners/A1/buckets/?date=2026-11-21&format=csv"))
    assert buckets[0] == ["start", "pv", "pv_self"] and len(buckets) == 1 + 288
    assert buckets[1 + 150] == ["2026-11-21T12:30:00+08:00", "2", "0"]
    ranked = read_csv(client.get("/api/v1/rankings/partners/?window=1h&scope=self&format=csv"))
    assert ranked == [["rank", "partner", "pv"], ["1", "B", "4"], ["2", "A1a", "2"], ["3", "A2", "1"]]
    series = read_csv(client.get("/api/v1/series/?precision=3600&start=2026-11-21&end=2026-11-21&format=csv"))
    assert series[0] == ["ts", "count"] and len(series) == 1 + 24
    assert series[1 + 12] == ["2026-11-21T12:00:00+08:00", "7"]
    assert sum(int(count) for _, count in series[1:]) == 7
    # JSON stays the default.
    assert client.get("/api/v1/series/?precision=3600")["Content-Type"] == "application/json"


@pytest.mark.django_db
def test_the_active_users_csv_holds_every_user_not_one_page():
    create_tree()
    today = local_day(timezone.now())
    pipe = get_redis_connection("default").pipeline(transaction=False)
    for user_id in range(1, 2502):  # more than two pages of 1,000
        queue_login(pipe, user_type="client", user_id=user_id, day=today)
    queue_login(pipe, user_type="office", user_id=7, day=today)
    pipe.execute()
    client = staff_client()
    rows = read_csv(client.get(f"/api/v1/logins/active/?start={today}&end={today}&format=csv"))
    assert rows[0] == ["user_type", "user_id"]
    assert rows[1:] == [["client", str(n)] for n in range(1, 2502)] + [["office", "7"]]
    one_type = read_csv(
        client.get(f"/api/v1/logins/active/?user_type=office&start={today}&end={today}&format=csv")
    )
    assert one_type == [["user_type", "user_id"], ["office", "7"]]
    days = read_csv(client.get(f"/api/v1/logins/client/5/?start={today}&end={today}&format=csv"))
    assert days == [["date"], [today.isoformat()]]


@pytest.mark.django_db
def test_a_login_during_an_active_users_csv_neither_repeats_nor_skips_anyone():
    # The ids straddle a 64 KB read of the union (bit 1,048,576) and fill two 10,000-row chunks. A user with a
    # lower id than all the others logs in once rows have arrived: the export holds the users active when it
    # began, each once (the newcomer shows in the next export).
    create_tree()
    today = local_day(timezone.now())
    client = get_redis_connection("default")
    pipe = client.pipeline(transaction=False)
    for user_id in range(1_040_000, 1_060_000):
        queue_login(pipe, user_type="client", user_id=user_id, day=today)
    pipe.execute()
    response = staff_client().get(
        f"/api/v1/logins/active/?user_type=client&start={today}&end={today}&format=csv"
    )
    pieces = iter(response.streaming_content)
    received = [next(pieces)]
    while b"".join(received).count(b"\n") < 2:  # past the header: the union has been taken
        received.append(next(pieces))
    pipe = client.pipeline(transaction=False)
    queue_login(pipe, user_type="client", user_id=5, day=today)
    pipe.execute()
    received.extend(pieces)
    rows = list(csv.reader(io.StringIO(b"".join(received).decode())))
    assert rows[0] == ["user_type", "user_id"]
    assert [int(user_id) for _, user_id in rows[1:]] == list(range(1_040_000, 1_060_000))
