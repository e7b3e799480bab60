"""``simulate`` with orders: every way the order contract can be exercised, and a truth whose arithmetic holds."""

import datetime as dt
import hashlib
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from conversions.models import ExchangeRate
from cpsproject.common.timeutil import local_day
from partners.selectors import Lineage
from stats.devtools import demo
from stats.devtools.demo import live_traffic, seed_demo
from stats.devtools.order_truth import (
    CommissionTerms,
    OrderTruth,
    SimulatedOrder,
    commission_of,
    read_rates,
    split_commission,
    to_reporting,
)
from stats.devtools.producer import write_to_file
from stats.devtools.simulate import GroundTruth, simulate_events
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import DailyStat
from stats.pipeline.consumer import StopFlag, consume_file
from tests.factories import at, create_tree, hll_estimate_of

pytestmark = pytest.mark.django_db

RATES = {"USD": [(dt.date(2020, 1, 1), Decimal("7.1"))], "JPY": [(dt.date(2020, 1, 1), Decimal("0.048"))]}


def parsed(values: list[bytes]) -> list[dict]:
    """The well-formed events of a run, in the order they are sent."""
    events = []
    for value in values:
        try:
            event = json.loads(value)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def moment(event: dict) -> dt.datetime:
    ts = event["ts"]
    return (
        dt.datetime.fromtimestamp(ts / 1000, dt.UTC) if isinstance(ts, int) else dt.datetime.fromisoformat(ts)
    )


def test_without_orders_a_seeded_run_is_byte_for_byte_what_it_was():
    create_tree()
    values, truth = simulate_events(events=500, day=dt.date(2026, 11, 20), users=40, seed=7)
    # The digest of the same call before orders existed.
    assert hashlib.sha256(b"\n".join(values)).hexdigest() == (
        "5110e3734d3670185392636526f5a8a2510eb3e015f14c060c136a2d6a6769f7"
    )
    assert truth.orders.orders == []


@dataclass
class SimulatedRun:
    """A run of ``simulate`` with orders, parsed as the consumer will read it."""

    now: dt.datetime
    events: list[dict]
    truth: GroundTruth
    by_order: dict[str, list[tuple[int, dict]]]  # the order's events with their place in the stream
    views: dict[str, list[tuple[int, dict]]]  # buyers' partner views with their place in the stream

    @property
    def orders(self) -> list[dict]:
        return [e for e in self.events if e.get("type") == "order"]

    @property
    def first_paid(self) -> list[dict]:
        return [next(e for _, e in rows if e["status"] == "paid") for rows in self.by_order.values()]


def simulated_run() -> SimulatedRun:
    create_tree()
    now = timezone.now()
    values, truth = simulate_events(
        events=600, day=local_day(now), users=40, seed=11, until=now, orders_share=0.3
    )
    events = parsed(values)
    by_order, views = defaultdict(list), defaultdict(list)
    for position, event in enumerate(events):
        if event.get("type") == "order":
            by_order[event["order_id"]].append((position, event))
        elif event.get("partner") and event.get("openid", "").startswith("b-"):
            views[event["openid"]].append((position, event))
    return SimulatedRun(now=now, events=events, truth=truth, by_order=by_order, views=views)


def test_simulated_orders_are_valid_events_of_the_day_in_three_currencies():
    run = simulated_run()
    assert len(run.by_order) == len(run.truth.orders.orders) > 100
    assert {e["currency"] for e in run.orders} == {"CNY", "USD", "JPY"}
    assert all(type(e["amount"]) is int and e["amount"] > 0 for e in run.orders)
    assert all(local_day(moment(e)) == local_day(run.now) and moment(e) <= run.now for e in run.orders)
    for rows in run.by_order.values():
        first_paid = next(e for _, e in rows if e["status"] == "paid")
        refunds = [e for _, e in rows if e["status"] != "paid"]
        assert all(moment(r) > moment(first_paid) for r in refunds)
        assert all(e["currency"] == first_paid["currency"] for _, e in rows)
        assert sum(r["amount"] for r in refunds) <= first_paid["amount"]


def test_simulated_orders_go_to_their_explicit_partner_to_the_last_view_or_to_the_site():
    run = simulated_run()
    explicit = [e for e in run.first_paid if "partner" in e]
    assert explicit and all(e["partner"] in {"A", "A1", "A1a", "A2", "B"} for e in explicit)
    by_view = [
        e
        for e in run.first_paid
        if "partner" not in e
        and any(moment(v) < moment(e) and p < run.events.index(e) for p, v in run.views[e["openid"]])
    ]
    assert by_view
    # The buyer's later view is sent before the earlier one: the last by ts must win, not the last to arrive.
    assert any(len(seen) == 2 and moment(seen[0][1]) > moment(seen[1][1]) for seen in run.views.values())
    site = {e["order_id"] for e in run.first_paid if "partner" not in e and not run.views[e["openid"]]}
    figures = run.truth.orders.figures()
    assert site and figures[NO_PARTNER]["orders_self"] == len(site)
    assert sum(row["orders_self"] for row in figures.values()) == len(run.by_order)


def test_simulated_payments_arrive_late_and_twice_and_refunds_before_their_payment():
    run = simulated_run()
    # Late: a payment first sent after events of later places in the stream and with a later ts.
    late, latest_place, latest_ts, seen = [], -1, None, set()
    for event in run.events:
        event_id = event.get("event_id", "")
        place = int(event_id.split("-")[3]) if event_id.startswith("sim-") else -1
        if event.get("status") == "paid" and event["order_id"] not in seen:
            seen.add(event["order_id"])
            if place < latest_place:
                late.append(moment(event) < latest_ts)
        latest_place = max(latest_place, place)
        latest_ts = max(latest_ts or moment(event), moment(event)) if "ts" in event else latest_ts
    assert late and all(late)
    # Repeated: a payment sent twice under its event id; another order paid a second time under a new one.
    ids = Counter(e["event_id"] for e in run.orders)
    twice = [i for i, n in ids.items() if n == 2]
    assert twice and max(ids.values()) == 2
    assert all(next(e for e in run.orders if e["event_id"] == i)["status"] == "paid" for i in twice)
    assert any(
        len({e["event_id"] for _, e in rows if e["status"] == "paid"}) == 2 for rows in run.by_order.values()
    )
    assert any(rows[0][1]["status"] == "refunded" for rows in run.by_order.values())


def test_simulated_orders_are_partly_refunded_and_cancelled():
    run = simulated_run()
    ends = Counter()
    for rows in run.by_order.values():
        first_paid = next(e for _, e in rows if e["status"] == "paid")
        refunds = [e for _, e in rows if e["status"] != "paid"]
        if refunds and refunds[-1]["status"] == "cancelled":
            assert sum(r["amount"] for r in refunds) == first_paid["amount"]  # the rest, with its amount
            ends["cancelled"] += 1
            ends["cancelled after a part refund"] += len(refunds) == 2
        elif refunds:
            assert {r["status"] for r in refunds} == {"refunded"}
            ends["partly refunded"] += 1
    assert ends["partly refunded"] and ends["cancelled"] and ends["cancelled after a part refund"]


def test_live_simulated_orders_fall_in_the_minutes_before_now():
    create_tree()
    now = timezone.now()
    values, truth = simulate_events(
        events=200, day=local_day(now), users=40, until=now, rate=20, orders_share=0.2
    )
    orders = [e for e in parsed(values) if e.get("type") == "order"]
    assert len({e["order_id"] for e in orders}) == len(truth.orders.orders) > 10
    # 200 events at 20 a second end now; an order's events spread over up to 10 minutes before its place.
    assert all(now - dt.timedelta(minutes=10, seconds=10) <= moment(e) <= now for e in orders)


def test_the_order_truth_on_a_small_case_worked_by_hand():
    p1, p1a, p1a1 = Lineage(("P1",), True), Lineage(("P1", "P1A"), True), Lineage(("P1", "P1A", "P1A1"), True)
    truth = OrderTruth(terms=CommissionTerms(), rates=RATES, partner_bp={"P1A": 450, "P1A1": None})
    truth.add_partner_view("b-2", at("2026-11-21T09:00:00"), p1a1)
    truth.add_partner_view("b-2", at("2026-11-21T10:00:00"), p1a)
    truth.add_partner_view("b-3", at("2026-11-21T12:00:00"), p1)  # after its order: no attribution
    truth.add_partner_view("b-4", at("2026-10-21T10:00:00"), p1)  # 31 days before: outside the window
    truth.orders += [
        SimulatedOrder("SO-1", "b-1", at("2026-11-21T08:00:00"), 1999, "USD", explicit=p1a1, refunds=[500]),
        SimulatedOrder("SO-2", "b-2", at("2026-11-21T11:00:00"), 1234, "JPY", explicit=None, refunds=[1]),
        SimulatedOrder("SO-3", "b-3", at("2026-11-21T11:30:00"), 1001, "CNY", explicit=None),
        SimulatedOrder("SO-4", "b-4", at("2026-11-21T11:00:00"), 2000, "CNY", explicit=None),
        SimulatedOrder("SO-5", "b-1", at("2026-11-21T13:00:00"), 300, "CNY", explicit=p1a1),
    ]
    # SO-1: paid 1999 US cents × 7.1 = 14192.9 → 14193 fen, refunded 500 × 7.1 = 3550, net 10643; P1A1 is on
    #   level 3 (200 bp): 212.86 → 213, split 8000/1500/500 = 170.4/31.95/10.65 → 170 + 32 + 11 (the two
    #   units left go to the largest remainders .95 and .65).
    # SO-2: by the later view (P1A): 1234 yen × 0.048 = 59.232 CNY → 5923 fen, refunded 1 yen → 4.8 → 5, net
    #   5918; P1A's own 450 bp: 266.31 → 266; a chain of two: P1A 8000 + 500, P1 1500: 226.1 + 39.9 → 226 + 40.
    # SO-3 and SO-4: the site's: 1001 + 2000 fen.
    # SO-5: SO-1's buyer again, 300 fen at 200 bp: 6, split 4.8/0.9/0.3 → 4/0/0 and the two units left to the
    #   remainders .9 (P1A) and .8 (P1A1): 5 + 1 + 0.
    zero = {"commission": 0}
    assert truth.figures() == {
        NO_PARTNER: figures(2, 2, 3001, 0, self_too=True) | zero,
        "P1": figures(3, 2, 20416, 3555) | {"commission": 11 + 40 + 0},
        "P1A": figures(3, 2, 20416, 3555) | self_figures(1, 1, 5923, 5) | {"commission": 32 + 226 + 1},
        "P1A1": figures(2, 1, 14493, 3550, self_too=True) | {"commission": 170 + 5},
    }


def figures(orders: int, buyers: int, gross: int, refunded: int, *, self_too: bool = False) -> dict[str, int]:
    row = {"orders": orders, "buyers": buyers, "gross": gross, "refunded": refunded, "net": gross - refunded}
    return row | self_figures(*(list(row.values())[:4] if self_too else (0, 0, 0, 0)))


def self_figures(orders: int, buyers: int, gross: int, refunded: int) -> dict[str, int]:
    return {
        "orders_self": orders,
        "buyers_self": buyers,
        "gross_self": gross,
        "refunded_self": refunded,
        "net_self": gross - refunded,
    }


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        (15, "USD", 107),  # 106.5 fen: half up, not to even
        (25, "USD", 178),  # 177.5
        (10, "JPY", 48),  # 0.48 CNY: yen have no minor unit, fen two
        (1, "JPY", 5),  # 4.8
        (12345, "CNY", 12345),
    ],
)
def test_amounts_convert_half_up_once_per_event(amount, currency, expected):
    rate = RATES[currency][0][1] if currency in RATES else Decimal(1)
    assert to_reporting(amount, currency=currency, rate=rate, reporting="CNY") == expected


def test_commission_rounds_half_up_and_splits_by_largest_remainder_ties_to_the_closer_partner():
    assert commission_of(10643, 200) == 213
    assert commission_of(2500, 500) == 125
    assert commission_of(10, 500) == 1  # 0.5
    shares = (8000, 1500, 500)
    assert split_commission(10, chain=["A", "B", "C"], shares=shares) == {"A": 8, "B": 2, "C": 0}  # .5 tie
    assert split_commission(1, chain=["A", "B", "C"], shares=shares) == {"A": 1, "B": 0, "C": 0}
    assert split_commission(3, chain=["A", "B"], shares=shares) == {"A": 3, "B": 0}  # 2.55 and .45
    assert split_commission(7, chain=["A"], shares=shares) == {"A": 7}


def test_the_sample_rates_file_holds_the_simulated_currencies():
    assert read_rates() == RATES


def test_simulate_prints_the_orders_truth_and_writes_it_as_json(tmp_path, capsys):
    create_tree()
    call_command(
        "simulate",
        *("--events", "300", "--users", "20", "--seed", "3", "--orders-share", "0.2"),
        *("--to", f"file:{tmp_path / 'events.jsonl'}", "--truth", str(tmp_path / "truth.json")),
    )
    out = capsys.readouterr().out.splitlines()
    written = json.loads((tmp_path / "truth.json").read_text())
    assert written["currency"] == "CNY"
    header = out.index("orders in CNY minor units:")
    assert out[header + 1].split() == ["partner", *next(iter(written["partners"].values()))]
    rows = [line.split() for line in out[header + 2 : -1]]
    assert [code for code, *_ in rows] == list(written["partners"])
    for code, *numbers in rows:
        assert list(map(int, numbers)) == list(written["partners"][code].values())
    assert out[-1].endswith(f" orders) to file:{tmp_path / 'events.jsonl'}")


def test_simulate_without_orders_prints_what_it_printed(tmp_path, capsys):
    create_tree()
    call_command("simulate", "--events", "50", "--seed", "3", "--to", f"file:{tmp_path / 'e.jsonl'}")
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["partner", "pv", "pv_self", "uv", "uv_self", "bot_pv"]
    assert "orders in CNY minor units:" not in out
    assert re.fullmatch(rf"\d+ events \(\d+ bad, \d+ bot\) to file:{tmp_path / 'e.jsonl'}", out[-1]), out[-1]


def spy_on_the_demo(monkeypatch, *, orders_counted: bool) -> list[dict]:
    """Record what the demo asks ``simulate`` for (``orders_share``) and the events it gets back."""
    calls: list[dict] = []
    real = demo.simulate_events

    def recording(**kwargs):
        values, truth = real(**kwargs)
        calls.append({"orders_share": kwargs.get("orders_share"), "events": parsed(values)})
        return values, truth

    monkeypatch.setattr(demo, "simulate_events", recording)
    # Whether a feature counts order events (the conversions app, once merged, registers the type).
    monkeypatch.setattr(demo, "orders_counted", lambda: orders_counted)
    return calls


def order_ids(calls: list[dict]) -> set[str]:
    return {e["order_id"] for call in calls for e in call["events"] if e.get("type") == "order"}


def test_the_live_trickle_sends_orders_only_where_they_are_counted(monkeypatch):
    create_tree()
    trickle = {"rate": 50, "logins_per_minute": 0, "bot_share": 0, "stop": StopFlag(), "tick_seconds": 0.2}
    calls = spy_on_the_demo(monkeypatch, orders_counted=False)
    live_traffic(**trickle, ticks=2)
    assert [call["orders_share"] for call in calls] == [0, 0] and not order_ids(calls)

    calls = spy_on_the_demo(monkeypatch, orders_counted=True)
    live_traffic(**trickle, ticks=1)
    # 15 orders a minute, 10 views in a tick of 0.2 s: 15 / 60 × 0.2 = 0.05 orders a tick, 0.005 of a place.
    assert calls[0]["orders_share"] == pytest.approx(0.005)
    # 3000 a minute: 10 a tick, every place of the 3 ticks an order.
    calls = spy_on_the_demo(monkeypatch, orders_counted=True)
    live_traffic(**trickle, ticks=3, orders_per_minute=3000)
    assert len(order_ids(calls)) == 30


def test_the_demo_seed_loads_the_sample_rates_once_and_orders_where_they_are_counted(monkeypatch, tmp_path):
    calls = spy_on_the_demo(monkeypatch, orders_counted=True)
    lines = seed_demo(events=600, files=tmp_path)
    assert lines[2] == "exchange rates: 2 loaded now from rates.csv"
    assert set(ExchangeRate.objects.values_list("currency", "valid_from", "rate")) == {
        ("USD", dt.date(2020, 1, 1), Decimal("7.1")),
        ("JPY", dt.date(2020, 1, 1), Decimal("0.048")),
    }
    # Yesterday's 120 events and today's 600, 5% of each orders: about 36 orders.
    assert [call["orders_share"] for call in calls] == [0.05, 0.05]
    assert 15 <= len(order_ids(calls)) <= 70
    assert seed_demo(events=600, files=tmp_path)[2] == "exchange rates: 2 kept"


def test_the_page_view_truth_still_holds_with_orders_and_their_buyers_views(tmp_path):
    create_tree()
    now = timezone.now()
    day = local_day(now)
    values, truth = simulate_events(events=800, day=day, users=60, until=now, seed=5, orders_share=0.2)
    write_to_file(tmp_path / "events.jsonl", values)
    consume_file(tmp_path / "events.jsonl", batch_size=200, stop=StopFlag())
    flush(include_open=True)
    rows = {(r.partner.code if r.partner else NO_PARTNER): r for r in DailyStat.objects.filter(date=day)}
    assert {code: (row.pv, row.uv) for code, row in rows.items()} == {
        code: (truth.pv[code], hll_estimate_of(truth.users[code])) for code in truth.pv
    }
    assert sum(truth.pv.values()) > 800 * 0.7  # the buyers' views among them
