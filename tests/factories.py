"""Plain builders for test data."""

from django.contrib.auth import get_user_model

from partners.models import Partner
from partners.services import partner_create


def create_partner(code: str, *, parent: Partner | None = None, name: str | None = None) -> Partner:
    return partner_create(code=code, name=name or f"Partner {code}", parent=parent)


def create_tree() -> dict[str, Partner]:
    """Build A ─ A1 ─ A1a, A ─ A2, and B: three levels under A, one lone root."""
    a = create_partner("A")
    a1 = create_partner("A1", parent=a)
    return {
        "A": a,
        "A1": a1,
        "A1a": create_partner("A1a", parent=a1),
        "A2": create_partner("A2", parent=a),
        "B": create_partner("B"),
    }


def create_staff(username: str = "staff", password: str = "pw", *, viewer: bool = True):
    """A staff user, in the "statistics viewers" group unless ``viewer=False`` (then no permission at all)."""
    user = get_user_model().objects.create_user(username=username, password=password, is_staff=True)
    if viewer:
        user.groups.add(statistics_viewers())
    return user


def statistics_viewers():
    """The group as the migrations make it: a transactional test's flush empties the tables they filled."""
    from django.contrib.auth.models import Group, Permission

    from cpsproject.common.viewers import PERMISSIONS, ensure_statistics_viewers
    from quality.migrations import PERMISSIONS as QUALITY_PERMISSIONS

    return ensure_statistics_viewers(
        group_model=Group, permission_model=Permission, permissions=[*PERMISSIONS, *QUALITY_PERMISSIONS]
    )


# --- events -----------------------------------------------------------------------------------------------

import datetime as dt  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

SHANGHAI = ZoneInfo("Asia/Shanghai")
_offsets = itertools.count()
_ids = itertools.count()


def at(text: str) -> dt.datetime:
    """An aware datetime from 'YYYY-MM-DD HH:MM[:SS]' in Shanghai time."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=SHANGHAI)


def pv_event(ts: dt.datetime, partner: str | None = None, openid: str = "o-1", **extra) -> bytes:
    event = {
        "event_id": extra.pop("event_id", f"e-{next(_ids)}"),
        "type": "pv",
        "ts": ts.isoformat(),
        "openid": openid,
    }
    if partner:
        event["partner"] = partner
    event.update(extra)
    return json.dumps(event).encode()


def login_event(ts: dt.datetime, user_type: str, user_id, **extra) -> bytes:
    event = {"event_id": f"l-{next(_ids)}", "type": "login", "ts": int(ts.timestamp() * 1000)}
    event.update(user_type=user_type, user_id=user_id, **extra)
    return json.dumps(event).encode()


def feed(
    values: list[bytes],
    *,
    now: dt.datetime,
    partition: int = 0,
    source: str = "test-topic",
    group: str = "g",
    archive_concurrently: bool = False,
):
    """Run values through the real ingest pipeline as one batch from one partition.

    ``archive_concurrently`` (as the consumer runs it) commits from another thread: only in transactional tests.
    """
    from stats.pipeline.ingest import Message, process_batch

    messages = [Message(source, partition, next(_offsets), v) for v in values]
    return process_batch(messages, group=group, now=now, archive_concurrently=archive_concurrently)


def archived_event_count() -> int:
    """How many raw events the configured archive holds (each event_id once)."""
    from stats.pipeline.archive import get_archive

    return get_archive().count_events()


# --- API clients ------------------------------------------------------------------------------------------


def staff_client(username: str = "staff"):
    """An API client logged in as a new staff user."""
    from rest_framework.test import APIClient

    create_staff(username=username)
    client = APIClient()
    client.login(username=username, password="pw")
    return client


def portal_client(code: str):
    """An API client holding the portal token of partner ``code``, as a partner's portal would."""
    from rest_framework.test import APIClient

    from partners.services import portal_token_issue

    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Token " + portal_token_issue(partner=Partner.objects.get(code=code))
    )
    return client


# --- the stats tables -------------------------------------------------------------------------------------


def daily(code: str | None, day: dt.date):
    """The DailyStat row of partner ``code`` (None: traffic with no partner) on ``day``."""
    from stats.models import DailyStat

    return (
        DailyStat.objects.get(partner__code=code, date=day)
        if code
        else DailyStat.objects.get(partner=None, date=day)
    )


def table_snapshot() -> tuple[list, list]:
    """Every bucket and day row, sorted: two flushes that change nothing leave equal snapshots."""
    from stats.models import BucketStat, DailyStat

    buckets = sorted(
        BucketStat.objects.values_list("partner_id", "start", "generation", "pv", "pv_self", "bot_pv"),
        key=lambda row: (row[0] or 0, *row[1:]),
    )
    days = sorted(
        DailyStat.objects.values_list("partner_id", "date", "pv", "pv_self", "uv", "uv_self", "bot_pv"),
        key=lambda row: (row[0] or 0, row[1]),
    )
    return buckets, days


def hll_estimate_of(users) -> int:
    """What a Redis HyperLogLog holding exactly ``users`` estimates: the UV a flush must report for them.

    A day's UV is a PFCOUNT of merged HyperLogLogs, and merging keeps the registers of the union, so counting
    the true users in a fresh HyperLogLog gives the very number expected. Comparing with it is exact, where a
    tolerance around the true count (Redis' standard error is 0.81%) fails now and then on correct counts.
    """
    import uuid

    from django_redis import get_redis_connection

    from cpsproject.common.redis_keys import scratch

    client, key = get_redis_connection("default"), scratch(f"test-hll-{uuid.uuid4().hex}")
    # Not in one pipeline: a Redis Cluster client refuses PFCOUNT inside a pipeline.
    pipe = client.pipeline(transaction=False)
    users = list(users)
    for first in range(0, len(users), 1000):
        pipe.pfadd(key, *users[first : first + 1000])
    pipe.execute()
    try:
        return client.pfcount(key)
    finally:
        client.delete(key)
