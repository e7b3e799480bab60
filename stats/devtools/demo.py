"""What ``scripts/demo`` loads into an empty installation."""

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
from stats.models import DailyStat
from stats.pipeline.consumer import StopFlag, consume_file

logger = logging.getLogger(__name__)

SAMPLE_PARTNERS = Path(settings.BASE_DIR) / "sample" / "partners.csv"
DEMO_USER = ("demo", "demo")
DEMO_EVENTS = 50_000


def seed_demo(*, events: int = DEMO_EVENTS) -> str:
    """Load the sample tree, the demo superuser and today's synthetic traffic when missing; return a summary.

    The traffic runs from midnight until now, so the dashboard the demo opens on has a day to show.
    """
    loaded = 0
    if not Partner.objects.exists():
        loaded = len(partners_import_csv(text=SAMPLE_PARTNERS.read_text(encoding="utf-8")))
    user_model = get_user_model()
    if not user_model.objects.filter(username=DEMO_USER[0]).exists():
        user_model.objects.create_superuser(DEMO_USER[0], "demo@example.com", DEMO_USER[1])
    now = timezone.now()
    traffic = "kept"
    if not DailyStat.objects.filter(date=local_day(now)).exists():
        # The same path production takes, replayed from a file: parse, archive, Redis, then flush to SQL.
        path = settings.RUN_DIR / f"demo-events-{local_day(now):%Y%m%d}.jsonl"
        logger.info("simulating %d events of today and consuming them", events)
        values, _ = simulate_events(events=events, day=local_day(now), users=max(events // 6, 1), until=now)
        write_to_file(path, values)
        result = consume_file(path, batch_size=2000, stop=StopFlag())
        flush(include_open=True)
        traffic = result.summary()
    return (
        f"partners: {Partner.objects.count()} ({loaded} loaded now); superuser {DEMO_USER[0]}/{DEMO_USER[1]}; "
        f"today's traffic: {traffic}"
    )
