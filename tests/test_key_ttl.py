"""Storage that does not grow without bound: every Redis key the product writes carries a safety TTL, and no
safety TTL is short enough to beat the job that moves or trims its key.

The cycle below drives every writer once: ``manage.py consume`` replays page views (partner, no partner, bot),
logins and bad input through every registered counter; the API records a login and counts a failed login
(its throttle keys); then flush, reconcile, rankings rotation, series clean, the login sync, the retention
purge, and the readers that build scratch keys (rankings, day stats, login queries, health and metrics).
"""

import datetime as dt
import re

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from conversions.conf import conversion_setting
from loginlog import keys as login_keys
from loginlog.selectors import active_user_count
from loginlog.services import sync_logins
from stats import keys as stats_keys
from stats.counters.rankings import rotate_all, top_partners
from stats.counters.series import clean_series
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.jobs.retention import purge_expired
from stats.pipeline.lag import record_end_offsets
from stats.read.health import health_problems
from stats.read.selectors import partner_days
from tests.conftest import free_port
from tests.factories import at, create_staff, create_tree, feed, login_event, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")
ONE_DAY = 86400
# The weekly sync may miss several runs (a broken qcluster over a long weekend, a deploy freeze).
MISSED_SYNCS = 4


def key_floors(prefix: str, settings) -> list[tuple[str, int]]:
    """(pattern of a key's start, the shortest safety TTL a key so named may have): what its job needs, and then
    some. ``{P}`` is the shared tag, ``{P:p…}`` a Kafka partition's, ``{P:login:…}`` a block of users'."""
    shared = re.escape("{" + prefix + "}")
    partition = re.escape("{" + prefix) + r":p[^}]*\}"
    logins = re.escape("{" + prefix) + r":login:[^}]*\}"
    lateness = settings.CPS_STATS["MAX_LATENESS_SECONDS"]
    login_floor = (31 + settings.CPS_LOGINS["RETENTION_DAYS"] + MISSED_SYNCS * 7) * ONE_DAY
    return [
        # Flushed every minute, but a late event re-creates them up to the maximum lateness.
        (f"{partition}:pv:", lateness),
        (f"{partition}:uv:", lateness),
        # A partner-day's traffic-quality signals: written up to the lateness, deleted once it is reconciled.
        (f"{partition}:q:", lateness),
        (f"{shared}:q:index", 365 * ONE_DAY),
        # Written until the month ends, kept for the retention after it, synced weekly (and syncs get missed).
        (f"{logins}:", login_floor),
        (f"{shared}:login:blocks", login_floor),
        # Read back after any silence: a consumer restart, the last success of a weekly job.
        (f"{partition}:offset:", 365 * ONE_DAY),
        (f"{partition}:deadletters", 365 * ONE_DAY),
        # Read by every live API answer, written by every batch: a day without traffic must not expire it.
        (f"{partition}:version", 365 * ONE_DAY),
        (f"{partition}:metrics:", 365 * ONE_DAY),
        (f"{shared}:metrics:", 365 * ONE_DAY),
        (f"{shared}:partitions", 365 * ONE_DAY),
        (f"{shared}:layout", 365 * ONE_DAY),
        # The lag figures show their age: they may go stale, never vanish while nothing writes them.
        (f"{shared}:kafka:", 365 * ONE_DAY),
        (f"{shared}:jobs:", 365 * ONE_DAY),
        (f"{partition}:series:known", 365 * ONE_DAY),
        (f"{shared}:series:cleaned", 365 * ONE_DAY),
        # Trimmed by the cleaner and rotation: the shortest retention kept is an hour of 1-second samples.
        (f"{partition}:series:", 3600),
        (f"{partition}:rank:", 3600),
        # The API's cache of final days: the generation outlives every entry; an entry is refilled when it goes.
        (f"{shared}:final:gen", 365 * ONE_DAY),
        (f"{shared}:final:", 1),
        # An API client's throttle log lives as long as its window: a minute at the configured rates.
        (re.escape("{" + prefix) + r":throttle:[^}]*\}", 1),
        # A buyer's last partner views attribute the buyer's orders for the attribution window after them.
        (
            re.escape("{" + prefix) + r":views:[^}]*\}",
            conversion_setting("ATTRIBUTION_WINDOW_DAYS") * ONE_DAY - 600,
        ),
    ]


@pytest.mark.time_machine("2026-11-21T13:00:00+08:00", tick=True)
def test_after_a_full_cycle_no_product_key_lives_forever_or_dies_before_its_job(
    redis_client, redis_prefix, settings, tmp_path
):
    settings.KAFKA_BOOTSTRAP_SERVERS = f"127.0.0.1:{free_port()}"  # the readers' lag: Kafka out of reach
    tree = create_tree()
    replay = tmp_path / "events.jsonl"
    replay.write_bytes(
        b"\n".join(
            [
                pv_event(NOON, "A1a", "u1"),
                pv_event(NOON, None, "u2"),
                pv_event(NOON, "B", "u3", ua="Googlebot/2.1"),
                login_event(NOON, "client", 7),
                login_event(NOON, "office", 8),
                b"{not json",
            ]
        )
    )
    call_command("consume", "--source", f"file:{replay}")
    feed([pv_event(LATER, "A2", "u4")], now=LATER)  # an open bucket that flush keeps
    admin = create_staff(username="admin")
    admin.is_superuser = True
    admin.save()
    api = APIClient()
    api.force_login(admin)
    assert (
        api.post("/api/v1/logins/", {"user_type": "client", "user_id": 9}, format="json").status_code == 201
    )
    assert Client().get("/api/v1/partners/", HTTP_AUTHORIZATION="Token nope").status_code == 401
    flush(now=LATER)
    rotate_all(now=LATER)
    clean_series(now=LATER, force=True)
    sync_logins(now=LATER)
    reconcile(day=DAY, now=LATER)
    purge_expired(now=LATER)
    top_partners(window="24h", now=LATER)
    partner_days(partner=tree["A"], start=DAY, end=DAY)
    assert active_user_count(user_type="client", start=DAY, end=DAY) == 2
    health_problems(now=LATER)  # its live lag probe records its (failed) outcome
    record_end_offsets("test-topic", {0: 7}, now=LATER)  # as a consumer does after a poll
    assert api.get("/metrics").status_code == 200

    product_keys = sorted(
        k.decode() for k in redis_client.scan_iter(match=f"*{{{redis_prefix}[:}}]*", count=1000)
    )
    ttls = {key: redis_client.ttl(key) for key in product_keys}
    assert [key for key, ttl in ttls.items() if ttl < 0] == []
    floors = key_floors(redis_prefix, settings)
    unknown = [key for key in product_keys if not any(re.match(start, key) for start, _ in floors)]
    assert unknown == []  # a new kind of key: give it a floor above
    too_short = [
        (key, ttl, floor)
        for key, ttl in ttls.items()
        for start, floor in floors
        if re.match(start, key) and ttl < floor
    ]
    assert too_short == []
    # The cycle wrote every kind of key there is.
    assert {start for key in product_keys for start, _ in floors if re.match(start, key)} == {
        start for start, _ in floors
    }


def test_a_write_renews_the_safety_ttl(redis_client):
    create_tree()
    feed([login_event(NOON, "client", 7)], now=NOON)
    day_key = login_keys.login_day(login_keys.block_of("client", 7), "20261121")
    month_key = login_keys.login_month("client", 7, "202611")
    for key in (day_key, month_key, stats_keys.offset("g", "test-topic", 0)):
        redis_client.expire(key, 100)
    feed([login_event(NOON + dt.timedelta(minutes=1), "client", 7)], now=NOON)
    for key in (day_key, month_key, stats_keys.offset("g", "test-topic", 0)):
        assert redis_client.ttl(key) > 100 * ONE_DAY


def test_login_keys_outlive_the_retention_and_several_missed_syncs(redis_client, settings):
    # A login written on the first of a month is still written to until the month ends (31 days), kept for
    # the retention after that, and must survive MISSED_SYNCS weekly syncs that did not run.
    create_tree()
    feed([login_event(at("2026-11-01 08:00"), "office", 3)], now=at("2026-11-01 09:00"))
    needed = (31 + settings.CPS_LOGINS["RETENTION_DAYS"] + MISSED_SYNCS * 7) * ONE_DAY
    for key in (
        login_keys.login_month("office", 3, "202611"),
        login_keys.login_day(login_keys.block_of("office", 3), "20261101"),
        login_keys.login_index(login_keys.block_of("office", 3), "202611"),
        login_keys.login_blocks(),
    ):
        assert redis_client.ttl(key) >= needed, key
