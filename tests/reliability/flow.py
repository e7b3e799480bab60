"""Traffic in, numbers out: what every fault scenario produces and what it checks afterwards."""

import datetime as dt
import logging
import re
from collections.abc import Sequence

from django.db.models import Count
from django.utils import timezone
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from cpsproject.common.timeutil import local_day
from stats.devtools.simulate import GroundTruth, simulate_events
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import DailyStat, DeadLetter
from stats.pipeline.ingest import stored_offsets
from tests.factories import archived_event_count, hll_estimate_of

log = logging.getLogger("reliability")

PARTITIONS = 3


def todays_traffic(*, events: int, users: int, seed: int, bad_share: float = 0.01):
    """``events`` values of today (business time) up to now, their exact truth, and the day."""
    now = timezone.now()
    day = local_day(now)
    values, truth = simulate_events(
        events=events, day=day, users=users, until=now, seed=seed, bad_share=bad_share
    )
    return values, truth, day


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    """Create ``topic``; a consumer's metadata request may have auto-created it first: check its partitions."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    except TopicAlreadyExistsError:
        (described,) = admin.describe_topics([topic])
        assert len(described["partitions"]) == partitions, described
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: Sequence[bytes], *, partitions: int = PARTITIONS) -> None:
    """Send ``values`` in order, value n to partition n % partitions: the same log every time it is called."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024, max_request_size=4 * 1024 * 1024
    )
    try:
        for n, value in enumerate(values):
            producer.send(topic, value=value, partition=n % partitions)
        producer.flush(timeout=120)
    finally:
        producer.close()


def counted_in_redis(settings) -> int:
    """Messages whose counts are in Redis: the next offsets stored with them (a fresh topic starts at 0)."""
    return sum(stored_offsets(group=settings.KAFKA_GROUP_ID, source=settings.KAFKA_TOPIC).values())


def reported_count(output: str) -> int:
    """The count in the summary line ``consume`` prints when it exits."""
    (counted,) = re.findall(r"counted (\d+) events", output)
    return int(counted)


def flushed(days: set[dt.date]) -> dict[str, DailyStat]:
    rows: dict[str, DailyStat] = {}
    for row in DailyStat.objects.filter(date__in=days).select_related("partner"):
        rows[row.partner.code if row.partner else NO_PARTNER] = row
    return rows


def assert_counted_exactly(truth: GroundTruth, *, day: dt.date, produced: int, do_flush: bool = True) -> None:
    """Flush, then check PV exact, UV as Redis estimates the true users, every event archived once, every bad
    one dead."""
    if do_flush:
        flush(include_open=True)
    rows = flushed({day})
    got = {code: (rows[code].pv, rows[code].pv_self) for code in truth.pv if code in rows}
    expected = {code: (truth.pv[code], truth.pv_self[code]) for code in truth.pv}
    assert got == expected, f"(pv, pv_self) per partner: counted {got}, expected {expected}"
    uv = {code: rows[code].uv for code in truth.pv}
    expected_uv = {code: hll_estimate_of(truth.users[code]) for code in truth.pv}
    assert uv == expected_uv, f"UV per partner: counted {uv}, Redis estimates the true users as {expected_uv}"
    assert_quality_counted_exactly(truth, day=day)
    good = produced - truth.bad
    archived = archived_event_count()
    dead = DeadLetter.objects.count()
    assert archived == good, f"archived {archived} raw events for {good} good ones"
    assert dead == truth.bad, f"{dead} dead letters for {truth.bad} bad events"
    log.info(
        "verified: %d events sent, %d counted (PV and UV exact for %d partners), "
        "%d archived once each, %d dead-lettered, 0 lost",
        produced,
        sum(truth.pv_self.values()) + sum(truth.bot_pv.values()),
        len(truth.pv),
        archived,
        dead,
    )


def assert_quality_counted_exactly(truth: GroundTruth, *, day: dt.date) -> None:
    """Traffic quality counts each partner's own views (bots included) once, like the PV buckets (its flush
    is idempotent, so it runs whether or not the caller flushed)."""
    from quality.flush import flush_quality
    from quality.models import QualityDay

    flush_quality()
    views = dict(QualityDay.objects.filter(date=day).values_list("partner__code", "pv"))
    expected = {
        code: truth.pv_self[code] + truth.bot_pv[code]
        for code in set(truth.pv_self) | set(truth.bot_pv)
        if code != NO_PARTNER and truth.pv_self[code] + truth.bot_pv[code]
    }
    assert views == expected, f"quality views per partner: counted {views}, expected {expected}"


def dead_letters_by_reason() -> dict[str, int]:
    return dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id")))
