"""What ``scripts/demo`` loads into an empty installation."""

import datetime as dt
import logging
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from partners.models import Partner
from partners.services import partners_import_csv
from stats.devtools.producer import write_to_file
from stats.devtools.simulate import simulate_events
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.models import DailyStat
from stats.pipeline.consumer import StopFlag, consume_file

logger = logging.getLogger(__name__)

SAMPLE_PARTNERS = Path(settings.BASE_DIR) / "sample" / "partners.csv"
DEMO_USER = ("demo", "demo")
DEMO_EVENTS = 50_000


def _replay(*, day: dt.date, events: int, until: dt.datetime | None):
    """Simulate a day's traffic and count it the way production does, replayed from a file."""
    path = settings.RUN_DIR / f"demo-events-{day:%Y%m%d}.jsonl"
    logger.info("simulating %d events of %s and consuming them", events, day)
    values, _ = simulate_events(events=events, day=day, users=max(events // 6, 1), until=until)
    write_to_file(path, values)
    return consume_file(path, batch_size=2000, stop=StopFlag())


def seed_demo(*, events: int = DEMO_EVENTS) -> str:
    """Load the sample tree, the demo superuser and today's synthetic traffic when missing; return a summary.

    Today's traffic runs from midnight until now, so the dashboard the demo opens on has a day to show;
    yesterday's (a fifth as much) is reconciled.
    """
    loaded = 0
    if not Partner.objects.exists():
        loaded = len(partners_import_csv(text=SAMPLE_PARTNERS.read_text(encoding="utf-8")))
    user_model = get_user_model()
    if not user_model.objects.filter(username=DEMO_USER[0]).exists():
        user_model.objects.create_superuser(DEMO_USER[0], "demo@example.com", DEMO_USER[1])
    now = timezone.now()
    today = local_day(now)
    yesterday = today - dt.timedelta(days=1)
    earlier = "kept"
    if not DailyStat.objects.filter(date=yesterday).exists():
        # Yesterday, flushed then reconciled as the nightly job would: the dashboard shows a second day and the
        # drift panel has a reconciled day to show.
        result = _replay(day=yesterday, events=events // 5, until=None)
        flush(include_open=True)
        reconcile(day=yesterday, now=now)
        earlier = result.summary()
    traffic = "kept"
    if not DailyStat.objects.filter(date=today).exists():
        result = _replay(day=today, events=events, until=now)
        flush(include_open=True)
        traffic = result.summary()
    return (
        f"partners: {Partner.objects.count()} ({loaded} loaded now); superuser {DEMO_USER[0]}/{DEMO_USER[1]}; "
        f"yesterday's traffic: {earlier}; today's traffic: {traffic}"
    )
