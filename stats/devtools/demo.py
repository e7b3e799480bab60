"""What ``scripts/demo`` loads into an empty installation, and the live traffic it keeps flowing."""

import datetime as dt
import json
import logging
import random
import secrets
import time
from collections import Counter
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import ResponseError

from cpsproject.common.timeutil import day_bounds, local_day
from partners.models import Partner
from partners.services import partners_import_csv
from stats.conf import stats_setting
from stats.devtools.order_truth import SAMPLE_RATES, read_rates
from stats.devtools.producer import write_to_file
from stats.devtools.simulate import simulate_events
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.models import DailyStat
from stats.pipeline.consumer import StopFlag, consume_file
from stats.pipeline.ingest import BatchResult, Message, PartnerDirectory, process_batch, stored_offsets
from stats.pipeline.metrics import counted_events
from stats.pipeline.registry import event_types
from stats.read.selectors import site_days

logger = logging.getLogger(__name__)

SAMPLE_PARTNERS = Path(settings.BASE_DIR) / "sample" / "partners.csv"
DEMO_USER = ("demo", "demo")
DEMO_EVENTS = 50_000
# Live traffic of the running demo: a small shop's daytime rate (the design documents' whole site averages 250
# events/s, a fifth of it with a partner), and a login every couple of seconds.
LIVE_RATE = 20.0
LIVE_LOGINS_PER_MINUTE = 30.0
LIVE_ORDERS_PER_MINUTE = 15.0  # an order every few seconds, a refund now and then
DEMO_ORDERS_SHARE = 0.05  # of the seeded days' events
LIVE_SOURCE = "demo:live"  # where the live traffic's offsets are stored, like a Kafka topic's
LOGIN_USERS = 3000  # user ids 1..LOGIN_USERS, so the same users come back on other days
LOGIN_DAYS = 7  # the seeded login history: as far back as CPS_MAX_LATENESS_SECONDS lets events in
# Redis's appendfsync values, as the start-up line says them.
FSYNC = {"everysec": "once a second", "always": "on every write", "no": "when the system decides"}


def login_values(
    *, count: int, start: dt.datetime, end: dt.datetime, rng: random.Random, run: str
) -> list[bytes]:
    """Return ``count`` login events at random moments from ``start`` to ``end``, under new event ids."""
    span = max((end - start).total_seconds(), 1.0)
    values = []
    for n in range(count):
        moment = start + dt.timedelta(seconds=rng.random() * span)
        event = {
            "event_id": f"demo-login-{run}-{n}",
            "type": "login",
            "ts": int(moment.timestamp() * 1000),
            "user_type": rng.choice(("client", "client", "client", "office")),
            "user_id": rng.randint(1, LOGIN_USERS),
        }
        values.append(json.dumps(event, separators=(",", ":")).encode())
    return values


def orders_counted() -> bool:
    """Whether this installation counts order events (a feature registered the ``order`` type)."""
    return "order" in event_types()


def _seed_rates() -> str:
    """Load ``sample/rates.csv`` when the installation keeps exchange rates and has none yet."""
    if not apps.is_installed("conversions"):
        return "exchange rates: not kept by this installation"
    # Looked up by name: stats never imports conversions, and the demo only fills its table.
    exchange_rate = apps.get_model("conversions", "ExchangeRate")
    if exchange_rate.objects.exists():
        return f"exchange rates: {exchange_rate.objects.count()} kept"
    if "import_rates" in get_commands():
        call_command("import_rates", str(SAMPLE_RATES), stdout=StringIO())
    else:
        exchange_rate.objects.bulk_create(
            exchange_rate(currency=currency, valid_from=valid_from, rate=rate)
            for currency, rows in read_rates(SAMPLE_RATES).items()
            for valid_from, rate in rows
        )
    return f"exchange rates: {exchange_rate.objects.count()} loaded now from {SAMPLE_RATES.name}"


def _replay(*, day: dt.date, events: int, until: dt.datetime | None, files: Path) -> BatchResult:
    """Simulate a day's traffic (orders too, where counted) and count it the way production does, from a file."""
    path = files / f"demo-events-{day:%Y%m%d}.jsonl"
    logger.info("simulating %d events of %s and consuming them", events, day)
    values, _ = simulate_events(
        events=events,
        day=day,
        users=max(events // 6, 1),
        until=until,
        orders_share=DEMO_ORDERS_SHARE if orders_counted() else 0.0,
    )
    write_to_file(path, values)
    return consume_file(path, batch_size=2000, stop=StopFlag())


def _seed_logins(*, now: dt.datetime, per_day: int, files: Path) -> str:
    """Replay ``per_day`` logins for each of the last ``LOGIN_DAYS`` days (today up to now)."""
    rng, run = random.Random(), secrets.token_hex(4)
    values = []
    for back in range(LOGIN_DAYS - 1, -1, -1):
        day = local_day(now) - dt.timedelta(days=back)
        start, following = day_bounds(day)
        # Events older than the lateness limit are refused: the oldest day starts an hour after that limit.
        oldest = now - dt.timedelta(seconds=stats_setting("MAX_LATENESS_SECONDS")) + dt.timedelta(hours=1)
        start = max(start, oldest)
        values += login_values(
            count=per_day, start=start, end=min(following, now), rng=rng, run=f"{run}-{back}"
        )
    path = files / f"demo-logins-{local_day(now):%Y%m%d}.jsonl"
    write_to_file(path, values)
    return consume_file(path, batch_size=2000, stop=StopFlag()).summary()


def _day_figures(day: dt.date, now: dt.datetime) -> str:
    """The day's PV and UV as the dashboard shows them (flushed rows plus what Redis holds)."""
    numbers = site_days(start=day, end=day, now=now)[0]
    return f"PV {numbers.pv:,}, UV {numbers.uv:,}" + (", reconciled" if numbers.reconciled else "")


def _counted_in_redis() -> Counter[str]:
    """Events the pipeline has counted into this Redis so far, by type (nothing: an empty or a new Redis)."""
    counted: Counter[str] = Counter()
    for (event_type, _source), n in counted_events().items():
        counted[event_type] += n
    return counted


def _redis_line(counted: Counter[str]) -> str:
    """Where Redis keeps its data, as it says itself, and what it held when the demo started."""
    url = urlsplit(settings.REDIS_URL)
    client = get_redis_connection("default")
    try:
        config = client.config_get("appendonly") | client.config_get("appendfsync") | client.config_get("dir")
        if config.get("appendonly") == "yes":
            fsync = FSYNC.get(config["appendfsync"], config["appendfsync"])
            kept = f"keeps its data in an append-only file in {config['dir']} (fsync {fsync})"
        else:
            kept = "keeps no append-only file: a restart loses what is not flushed yet"
    except ResponseError:  # a Redis that refuses CONFIG (a managed one) does not say
        kept = "persistence unknown (CONFIG GET refused)"
    if not counted:
        held = "nothing counted in it before this start"
    else:
        by_type = ", ".join(f"{n:,} {event_type}" for event_type, n in sorted(counted.items()))
        held = f"kept the {sum(counted.values()):,} events counted before this start ({by_type})"
    return f"Redis {url.hostname}:{url.port or 6379}: {kept}; {held}"


def seed_demo(*, events: int = DEMO_EVENTS, files: Path | None = None) -> list[str]:
    """Load the sample tree, the demo superuser and the days' synthetic traffic when missing.

    Return one line per subject saying what was kept from an earlier run and what was loaded now, with the
    figures the dashboard shows, measured after loading. Today's traffic runs from midnight until now, so the
    dashboard the demo opens on has a day to show; yesterday's (a fifth as much) is reconciled. The replay
    files go to ``files`` (default ``settings.RUN_DIR``).
    """
    files = files or settings.RUN_DIR
    counted = _counted_in_redis()  # before anything is counted: what Redis brought back
    loaded = 0
    if not Partner.objects.exists():
        loaded = len(partners_import_csv(text=SAMPLE_PARTNERS.read_text(encoding="utf-8")))
    user_model = get_user_model()
    superuser = "kept"
    if not user_model.objects.filter(username=DEMO_USER[0]).exists():
        user_model.objects.create_superuser(DEMO_USER[0], "demo@example.com", DEMO_USER[1])
        superuser = "created now"
    now = timezone.now()
    today = local_day(now)
    yesterday = today - dt.timedelta(days=1)
    lines = [
        f"partners: {Partner.objects.count()} ({loaded} loaded now)",
        f"superuser {DEMO_USER[0]}/{DEMO_USER[1]}: {superuser}",
        _seed_rates(),
        _redis_line(counted),
    ]
    if not DailyStat.objects.filter(date=yesterday).exists():
        # Yesterday, flushed then reconciled as the nightly job would: the dashboard shows a second day and the
        # drift panel has a reconciled day to show.
        result = _replay(day=yesterday, events=events // 5, until=None, files=files)
        flush(include_open=True)
        reconcile(day=yesterday, now=now)
        lines.append(
            f"yesterday {yesterday}: loaded now ({result.summary()}): {_day_figures(yesterday, now)}"
        )
    else:
        lines.append(f"yesterday {yesterday}: kept: {_day_figures(yesterday, now)}")
    if not DailyStat.objects.filter(date=today).exists():
        result = _replay(day=today, events=events, until=now, files=files)
        flush(include_open=True)
        logins = _seed_logins(now=now, per_day=max(events // 50, 1), files=files)
        lines.append(
            f"today {today}: loaded now ({result.summary()}; logins: {logins}): {_day_figures(today, now)}"
        )
    elif not counted:
        lines.append(
            f"today {today}: {_day_figures(today, now)} kept in the database only; Redis came back empty, so "
            f"what it had not flushed, the rankings, the last hour and the logins are gone (to start the demo "
            f"afresh, delete its database {settings.DATABASES['default']['NAME']})"
        )
    else:
        lines.append(f"today {today}: kept: {_day_figures(today, now)}")
    return lines


def live_traffic(
    *,
    rate: float = LIVE_RATE,
    logins_per_minute: float = LIVE_LOGINS_PER_MINUTE,
    orders_per_minute: float | None = None,
    bot_share: float = 0.02,
    stop: StopFlag,
    ticks: int | None = None,
    tick_seconds: float = 1.0,
    clock: Callable[[], dt.datetime] = timezone.now,
) -> BatchResult:
    """Count page views and logins as they happen, one batch per tick, until ``stop`` (or ``ticks`` ticks).

    Each tick holds ``rate * tick_seconds`` page views with timestamps over the tick just ended, drawn as
    ``simulate`` draws them, and on average ``logins_per_minute / 60 * tick_seconds`` logins and
    ``orders_per_minute / 60 * tick_seconds`` orders in their place (default ``LIVE_ORDERS_PER_MINUTE`` where
    order events are counted, else none; orders as ``simulate`` makes them: refunded now and then, some sent
    late or twice; their buyers' views come with them). They go through
    the pipeline as a consumer counts them (archive, counters, series, rankings, login bitmaps), from the
    source ``LIVE_SOURCE`` whose offset is stored with the counters.
    """
    group, directory, total = settings.KAFKA_GROUP_ID, PartnerDirectory(), BatchResult()
    offset = stored_offsets(group=group, source=LIVE_SOURCE).get(0, 0)
    rng, run = random.Random(), secrets.token_hex(4)
    views_per_tick = max(round(rate * tick_seconds), 1)
    if orders_per_minute is None:
        orders_per_minute = LIVE_ORDERS_PER_MINUTE if orders_counted() else 0.0
    orders_share = min(orders_per_minute / 60 * tick_seconds / views_per_tick, 1.0)
    carried_logins = 0.0
    tick = 0
    while not stop.is_set() and (ticks is None or tick < ticks):
        began = time.monotonic()
        now = clock()
        values, _truth = simulate_events(
            events=views_per_tick,
            day=local_day(now),
            users=max(DEMO_EVENTS // 6, 1),
            rate=views_per_tick / tick_seconds,
            until=now,
            bad_share=0,
            bot_share=bot_share,
            orders_share=orders_share,
        )
        carried_logins += logins_per_minute / 60 * tick_seconds
        logins, carried_logins = int(carried_logins), carried_logins - int(carried_logins)
        values += login_values(
            count=logins,
            start=now - dt.timedelta(seconds=tick_seconds),
            end=now,
            rng=rng,
            run=f"{run}-{tick}",
        )
        messages = [Message(LIVE_SOURCE, 0, offset + n, value) for n, value in enumerate(values)]
        total.add(process_batch(messages, group=group, directory=directory, now=now))
        offset += len(messages)
        tick += 1
        if ticks is None or tick < ticks:
            time.sleep(max(tick_seconds - (time.monotonic() - began), 0))
    return total
