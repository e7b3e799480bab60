"""Nothing a person opens waits on Kafka: the dashboard shows consumer lag from what was recorded in Redis."""

import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from django.utils.formats import date_format

from cpsproject.common.timeutil import to_local
from stats.pipeline.ingest import Message, process_batch
from stats.pipeline.lag import record_end_offsets
from tests.factories import create_tree, pv_event

pytestmark = pytest.mark.django_db

# A page that reads SQL and Redis takes about 0.1 s here; a load that waited on a Kafka probe would take at
# least the probe's 1.5 s timeout. The bound sits between the two so that a loaded machine does not fail it.
PAGE_SECONDS = 1.0


@pytest.fixture
def boss() -> Client:
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client()
    client.login(username="boss", password="pw")
    return client


def timed_get(client: Client, path: str) -> tuple[float, str]:
    started = time.monotonic()
    response = client.get(path)
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    return elapsed, response.content.decode()


def test_the_dashboard_answers_fast_with_kafka_out_of_reach(boss, kafka_down):
    timed_get(boss, "/admin/")  # the first load compiles templates and warms connections
    elapsed = min(timed_get(boss, "/admin/")[0] for _ in range(3))
    assert elapsed < PAGE_SECONDS


def test_the_dashboard_shows_the_lag_recorded_and_when_its_end_offsets_were_seen(boss, settings, kafka_down):
    create_tree()
    now = timezone.now().replace(microsecond=0)
    record_end_offsets(settings.KAFKA_TOPIC, {0: 40, 1: 7}, now=now)  # what a consumer's fetch saw
    values = [pv_event(now, "A1", f"u{n}") for n in range(10)]
    process_batch(
        [Message(settings.KAFKA_TOPIC, 0, n, v) for n, v in enumerate(values)],
        group=settings.KAFKA_GROUP_ID,
        now=now,
    )
    html = timed_get(boss, "/admin/")[1]
    table = html[html.index('id="consumer-lag"') : html.index("</table>", html.index('id="consumer-lag"'))]
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", table)
    assert rows == [("0", "10", "40", "30"), ("1", "—", "7", "7")]
    seen = re.search(r'id="lag-seen">([^<]*)<', html).group(1)
    assert seen == f"End offsets as seen at {date_format(to_local(now), 'DATETIME_FORMAT')}."
