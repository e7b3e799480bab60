"""A simulated week of partner traffic with known honest and bad partners, and the findings it must raise.

Eight business days ending on ``day``: the seven before only give the spike and drop partners their usual
hour (20:00-21:00); ``day`` holds everyone. Every number below is written from how the traffic is made, so a
test compares the product's figures with values nobody computed with the product's code:

- ``H1``..``H3`` honest: 400 views a day by 300 buyers (100 of them twice, 10 minutes apart), each buyer its
  own address, one view in 50 by Googlebot, 8 other buyers paying 2 to 120 minutes after their view;
- ``BOTFARM``: 300 views, 120 of them by HTTP libraries and crawlers (automated share 0.4);
- ``RELOADER``: one buyer on one address reloading every 10 s, 200 views (199 repeats, 0.995; the busiest
  address holds every view, 1.0);
- ``ROTATOR``: 256 views from each address of 203.0.113.0/24, a hosting range staff listed (listed share 1.0,
  256 addresses in 1 network, the 10 busiest 10/256 of the views);
- ``STUFFER``: 150 views whose first 30 buyers pay 3 s after their view (median 3 s; 30/150 orders per view
  against the honest partners' 8/400, a ratio of 10);
- ``SPIKER``: 120 views in its usual hour, 600 on ``day`` (a spike); ``DROPPER``: 300 usually, 20 on ``day``
  (a drop, its link broken at 20:00).
"""

import datetime as dt
import random
from collections.abc import Iterator
from typing import NamedTuple

import orjson

from cpsproject.common.timeutil import business_tz

HONEST = ("H1", "H2", "H3")
BAD = ("BOTFARM", "RELOADER", "ROTATOR", "STUFFER")
CHANGING = ("SPIKER", "DROPPER")
PARTNERS = HONEST + BAD + CHANGING
LISTED_NETWORKS = "cidr,label\n203.0.113.0/24,hosting (simulated)\n"
BROWSER = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148"
AUTOMATED_UAS = (
    "python-requests/2.31",
    "Go-http-client/1.1",
    "Scrapy/2.11 (+https://scrapy.org)",
    "okhttp/4.9",
)
# The hour the spike and the drop are measured on, and the moment the simulated day is looked at.
CHANGE_HOUR = 20
LOOKED_AT = dt.time(21, 7)

# (partner, rule) -> the value the finding must carry; no other finding may exist.
EXPECTED_FINDINGS = {
    ("BOTFARM", "automated"): 0.4,
    ("RELOADER", "repeats"): 0.995,
    ("RELOADER", "concentration"): 1.0,
    ("ROTATOR", "listed_networks"): 1.0,
    ("STUFFER", "fast_orders"): 3.0,
    ("STUFFER", "conversion_outlier"): 10.0,
}
# partner -> (direction, views of the last hour, median of the same hour on the 7 days before)
EXPECTED_CHANGES = {"SPIKER": ("spike", 600, 120), "DROPPER": ("drop", 20, 300)}


class Event(NamedTuple):
    key: str  # the Kafka key a producer would send: the buyer, so its views stay on one partition
    value: bytes


class _Maker:
    def __init__(self, day: dt.date, seed: int) -> None:
        self.day, self.random, self.count = day, random.Random(seed), 0
        self.prefix = f"q{day:%Y%m%d}-{seed}"

    def at(self, day: dt.date, seconds: int) -> dt.datetime:
        return dt.datetime.combine(day, dt.time(), business_tz()) + dt.timedelta(seconds=seconds)

    def view(self, when: dt.datetime, code: str, buyer: str, ip: str, ua: str = BROWSER) -> Event:
        self.count += 1
        payload = {"event_id": f"{self.prefix}-v{self.count}", "type": "pv", "ts": when.isoformat()}
        payload |= {"partner": code, "openid": buyer, "ip": ip, "ua": ua, "url": "/landing"}
        return Event(buyer, orjson.dumps(payload))

    def order(self, when: dt.datetime, buyer: str) -> Event:
        self.count += 1
        payload: dict[str, object] = {"event_id": f"{self.prefix}-o{self.count}", "type": "order"}
        payload["ts"] = when.isoformat()
        payload |= {"order_id": f"{self.prefix}-SO{self.count}", "openid": buyer, "status": "paid"}
        payload |= {"amount": 9900, "currency": "CNY"}
        return Event(buyer, orjson.dumps(payload))

    def address(self) -> str:
        # 1.x.x.x to 100.x.x.x: clear of the listed 203.0.113.0/24 and the reloader's 198.18.0.7
        r = self.random
        return f"{r.randint(1, 100)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def _honest(m: _Maker, code: str) -> Iterator[Event]:
    for n in range(300):
        buyer, ip = f"{code}-b{n}", m.address()
        seen = m.at(m.day, m.random.randint(8 * 3600, 19 * 3600))
        ua = "Googlebot/2.1 (+http://www.google.com/bot.html)" if n % 50 == 0 else BROWSER
        yield m.view(seen, code, buyer, ip, ua)
        if n < 100:
            yield m.view(seen + dt.timedelta(minutes=10), code, buyer, ip, ua)
        if 101 <= n < 109:  # not 100: a Googlebot view attributes no order
            yield m.order(seen + dt.timedelta(minutes=m.random.randint(2, 120)), buyer)


def _bad(m: _Maker) -> Iterator[Event]:
    for n in range(300):
        ua = AUTOMATED_UAS[n % 4] if n < 120 else BROWSER
        yield m.view(m.at(m.day, 9 * 3600 + n * 60), "BOTFARM", f"BOTFARM-b{n}", m.address(), ua)
    for n in range(200):
        yield m.view(m.at(m.day, 14 * 3600 + n * 10), "RELOADER", "RELOADER-b0", "198.18.0.7")
    for n in range(256):
        yield m.view(m.at(m.day, 10 * 3600 + n * 30), "ROTATOR", f"ROTATOR-b{n}", f"203.0.113.{n}")
    for n in range(150):
        seen = m.at(m.day, 11 * 3600 + n * 60)
        yield m.view(seen, "STUFFER", f"STUFFER-b{n}", m.address())
        if n < 30:
            yield m.order(seen + dt.timedelta(seconds=3), f"STUFFER-b{n}")


def _usual_hour(m: _Maker, code: str, day: dt.date, views: int) -> Iterator[Event]:
    for n in range(views):
        seen = m.at(day, CHANGE_HOUR * 3600 + n * 3600 // views)
        yield m.view(seen, code, f"{code}-{day:%m%d}-b{n}", m.address())


def simulated_week(day: dt.date, *, seed: int = 34) -> dict[dt.date, list[Event]]:
    """Return the events of the eight days ending on ``day``, per business day."""
    m = _Maker(day, seed)
    week: dict[dt.date, list[Event]] = {}
    for back in range(7, 0, -1):
        past = day - dt.timedelta(days=back)
        week[past] = [*_usual_hour(m, "SPIKER", past, 120), *_usual_hour(m, "DROPPER", past, 300)]
    today = [event for code in HONEST for event in _honest(m, code)]
    today += [*_bad(m), *_usual_hour(m, "SPIKER", day, 600), *_usual_hour(m, "DROPPER", day, 20)]
    week[day] = today
    return week


def looked_at(day: dt.date) -> dt.datetime:
    """The moment the simulated day is judged: after its spike hour."""
    return dt.datetime.combine(day, LOOKED_AT, business_tz())
