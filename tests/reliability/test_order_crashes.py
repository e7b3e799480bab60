"""``consume`` SIGKILLed while orders flow: no order, order event or ledger row twice, none missing.

The orders come with what makes them hard: attributed by a view or by an explicit partner, two currencies,
partial refunds, cancellations, refunds that arrive before their order, repeated events and a second ``paid``.
Each order's events and its buyer's view go to one partition (as a producer keying by order does), the view
first. Half the kills come from fault points (``after_recording`` among them: the orders are in the database,
the counters and offsets not yet in Redis), half from outside at a random moment. Expected values are worked
out here from the inputs with integer arithmetic.
"""

import datetime as dt
import json
import logging
import random
import signal
from dataclasses import dataclass, field
from decimal import Decimal

import pytest
from django.db.models import Count, Sum
from django.utils import timezone

from conversions.models import ExchangeRate, HeldRefund, LedgerEntry, Order, OrderEvent
from partners.models import Partner
from stats.models import DeadLetter
from tests.factories import create_tree
from tests.reliability.flow import PARTITIONS, counted_in_redis, produce
from tests.reliability.procs import patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

FAULT_POINTS = ["polled", "after_archive", "after_recording", "after_redis", "after_commit"]
# Level defaults (CPS_COMMISSION_BP): A and B level 1, A1 and A2 level 2, A1a level 3.
BP = {"A": 500, "B": 500, "A1": 300, "A2": 300, "A1a": 200}
CHAIN_LENGTH = {"A": 1, "B": 1, "A1": 2, "A2": 2, "A1a": 3}


@dataclass
class Expected:
    partner: str
    currency: str
    paid: int
    paid_reporting: int
    net_reporting: int
    events: int
    openid: str
    values: list[bytes] = field(default_factory=list)


def _reporting(amount: int, currency: str) -> int:
    """CNY as it is; JPY at 0.048 CNY a yen: amount x 4.8 fen, half up."""
    return amount if currency == "CNY" else (amount * 48 + 5) // 10


def _event(event_id: str, ts: dt.datetime, **fields: object) -> bytes:
    return json.dumps({"event_id": event_id, "ts": ts.isoformat(), **fields}).encode()


def _order(n: int, rng: random.Random, now: dt.datetime) -> Expected:
    """One order's messages, in the order they are produced, and what it must end as."""
    code = rng.choice(sorted(BP))
    currency = rng.choice(["CNY", "CNY", "JPY"])
    amount = rng.randint(100, 50_000)
    buyer = f"b-{n}"
    ts = now - dt.timedelta(minutes=rng.randint(30, 600))
    order = {"type": "order", "order_id": f"SO-{n}", "openid": buyer, "currency": currency}
    paid = _event(f"p-{n}", ts, status="paid", amount=amount, **order)
    expected = Expected(code, currency, amount, _reporting(amount, currency), 0, 1, buyer)
    by_view = rng.random() < 0.5
    if by_view:
        view = {"type": "pv", "partner": code, "openid": buyer, "url": f"/item/{n}"}
        expected.values.append(_event(f"v-{n}", ts - dt.timedelta(minutes=5), **view))
    else:
        paid = _event(f"p-{n}", ts, status="paid", amount=amount, partner=code, **order)
    refund = amount // 3
    later = ts + dt.timedelta(minutes=10)
    kind = rng.random()
    if kind < 0.3:  # a partial refund
        expected.values += [paid, _event(f"r-{n}", later, status="refunded", amount=refund, **order)]
        expected.net_reporting = expected.paid_reporting - _reporting(refund, currency)
        expected.events = 2
    elif kind < 0.4:  # a refund, then a cancellation of the rest
        cancel = _event(f"c-{n}", later + dt.timedelta(minutes=1), status="cancelled", **order)
        refunded = _event(f"r-{n}", later, status="refunded", amount=refund, **order)
        expected.values += [paid, refunded, cancel]
        expected.events = 3
    elif kind < 0.5:  # a refund that arrives before its order
        expected.values += [_event(f"r-{n}", later, status="refunded", amount=refund, **order), paid]
        expected.net_reporting = expected.paid_reporting - _reporting(refund, currency)
        expected.events = 2
    elif kind < 0.6:  # the paid event repeated, and a second paid of the order
        second = _event(f"p2-{n}", later, status="paid", amount=amount + 1, partner="B", **order)
        expected.values += [paid, paid, second]
        expected.net_reporting = expected.paid_reporting
    else:
        expected.values.append(paid)
        expected.net_reporting = expected.paid_reporting
    return expected


def _orders_and_traffic(
    count: int, *, now: dt.datetime, seed: int
) -> tuple[list[bytes], dict[str, Expected]]:
    """The topic's messages (value n goes to partition n % PARTITIONS) and each order's expected end."""
    rng = random.Random(seed)
    per_partition: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    expected = {}
    for n in range(count):
        order = _order(n, rng, now)
        expected[f"SO-{n}"] = order
        lane = per_partition[n % PARTITIONS]
        lane += order.values
        # page views of other buyers between orders, so batches mix types
        lane += [
            _event(f"x-{n}-{k}", now - dt.timedelta(minutes=1), type="pv", partner="A2", openid=f"u-{k}")
            for k in range(rng.randint(0, 6))
        ]
    longest = max(len(lane) for lane in per_partition)
    values = []
    for index in range(longest):
        for lane in per_partition:
            # a lane that ran out is padded with site views, so that value n stays on partition n % PARTITIONS
            values.append(
                lane[index]
                if index < len(lane)
                else _event(f"pad-{len(values)}", now - dt.timedelta(minutes=1), type="pv", openid="pad")
            )
    return values, expected


def _kill_consumer_a_few_times(children, kafka_settings, produced: int, kills_planned: int) -> int:
    rng = random.Random(5)
    kills = 0
    for attempt in range(kills_planned):
        before = counted_in_redis(kafka_settings)
        if before >= produced:
            break
        if attempt % 2:
            fault = f"{rng.choice(FAULT_POINTS)}:{rng.randint(1, 4)}"
            child = children.start(
                "consume", "--batch-size", "200", "--exit-when-idle", "3", CPS_FAULT_KILL=fault
            )
            how = f"fault point {fault}"
            if child.wait(180) != -signal.SIGKILL:
                continue
        else:
            child = children.start("consume", "--batch-size", "200")
            target = min(before + 200 * rng.randint(1, 3), produced)
            wait_until(
                lambda target=target, child=child: (
                    counted_in_redis(kafka_settings) >= target or not child.alive()
                ),
                # Counting up to three batches of 200 (with their orders' recording) after a start that may
                # wait for the member killed before to leave the group (its session) and a rebalance, on
                # top of a first join: a fixed 120 s ran out once at load 10.
                seconds=patience(target - before, batch=200, more=120),
                what="the consumer to count a few batches",
                every=0.005,
            )
            if not child.alive():
                continue
            child.process.send_signal(signal.SIGKILL)
            child.wait(10)
            how = "SIGKILL from outside"
        kills += 1
        log.info(
            "order crashes: kill %d (%s) after %d of %d messages",
            kills,
            how,
            counted_in_redis(kafka_settings),
            produced,
        )
    return kills


def test_consumer_killed_while_orders_flow_records_every_order_once(kafka_settings, children, sizes):
    create_tree()
    now = timezone.now()
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2000, 1, 1), rate=Decimal("0.048"))
    values, expected = _orders_and_traffic(400, now=now, seed=7)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)

    kills = _kill_consumer_a_few_times(children, kafka_settings, len(values), sizes.crash_kills + 1)
    # Idle longer than the group's session timeout: a member killed last still holds its partitions until then.
    # This consumer may still be joining when it has idled that long; it then exits only if a fetch of the
    # partitions it does not hold finds nothing left (tansu's ListOffsets answer falls short of the end).
    final = children.run("consume", "--batch-size", "1000", "--exit-when-idle", "10", seconds=300)
    assert final.process.returncode == 0, final.stderr()[-3000:]
    assert counted_in_redis(kafka_settings) == len(values), final.stdout()[-2000:] + final.stderr()[-3000:]
    assert kills >= 3
    log.info("order crashes: %d kills, then a clean run drained the topic", kills)

    assert not DeadLetter.objects.exists()
    assert not HeldRefund.objects.filter(applied_at=None).exists()
    orders = {o.order_id: o for o in Order.objects.select_related("partner")}
    assert set(orders) == set(expected)
    events = dict(OrderEvent.objects.values_list("order__order_id").annotate(n=Count("id")))
    ledger = dict(LedgerEntry.objects.values_list("order__order_id").annotate(total=Sum("amount")))
    commission_rows = dict(
        LedgerEntry.objects.filter(reason="commission").values_list("order__order_id").annotate(n=Count("id"))
    )
    codes = dict(Partner.objects.values_list("pk", "code"))
    for order_id, want in expected.items():
        got = orders[order_id]
        assert (got.partner.code, got.currency, got.amount, got.amount_reporting) == (
            want.partner,
            want.currency,
            want.paid,
            want.paid_reporting,
        ), order_id
        assert events[order_id] == want.events, order_id
        bp = BP[want.partner]
        assert got.commission_bp == bp
        assert codes[got.chain[0]["partner"]] == want.partner
        assert commission_rows[order_id] == CHAIN_LENGTH[want.partner], order_id
        # round half up of net x bp / 10,000, in integers
        assert ledger[order_id] == (want.net_reporting * bp + 5000) // 10_000, order_id
