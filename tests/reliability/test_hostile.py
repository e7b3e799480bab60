"""A generated corpus of hostile messages through the real broker and a real ``consume``: each becomes a dead
letter with the right reason, the consumer stays up and counts the good traffic after it, and the admin shows
the dead letters escaped."""

import datetime as dt
import json
import logging
import math
import random

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from kafka import KafkaProducer

from cpsproject.common.timeutil import local_day
from stats.models import DeadLetter
from tests.factories import create_staff, create_tree, pv_event
from tests.hostile import hostile_kinds
from tests.reliability.flow import dead_letters_by_reason, flushed, reported_count
from tests.reliability.procs import patience

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

INJECTION = "<script>alert(1)</script>' OR 1=1; DROP TABLE stats_rawevent;--"
MEGABYTE_PAYLOADS = 12  # 1 MB each: enough to prove the point without pushing gigabytes through the broker


def more_kinds(now: dt.datetime) -> dict[str, tuple[bytes, str]]:
    """Kinds beyond tests/hostile.py: wrong types, huge numbers, nesting, injection in every field, 1 MB."""
    pv = {"event_id": "h", "type": "pv", "ts": now.isoformat(), "partner": "A1", "openid": "o-h"}
    login = {"event_id": "l", "type": "login", "ts": now.isoformat(), "user_type": "client", "user_id": 1}

    def value(event: dict) -> bytes:
        return json.dumps(event).encode()

    return {
        "ts as float seconds": (value({**pv, "ts": now.timestamp()}), "ts_too_old"),
        "ts as huge integer": (value({**pv, "ts": 10**30}), "bad_ts"),
        "ts in 1970": (value({**pv, "ts": "1970-01-01T00:00:00+00:00"}), "ts_too_old"),
        "ts in 2999": (value({**pv, "ts": "2999-01-01T00:00:00+08:00"}), "ts_in_future"),
        "user_id as word": (value({**login, "user_id": "abc"}), "bad_field"),
        "user_id of 31 digits": (value({**login, "user_id": 10**30}), "bad_field"),
        "url as nested object": (value({**pv, "url": {"a": {"b": [1, {"c": 2}]}}}), "bad_field"),
        "openid as object": (value({**pv, "openid": {"$ne": None}}), "bad_field"),
        "partner as unknown number": (value({**pv, "partner": 99999999}), "unknown_partner"),
        "injection in every field": (
            value(
                {
                    **{k: INJECTION for k in ("event_id", "partner", "openid", "url", "ua", "ip")},
                    **{"type": "pv", "ts": now.isoformat()},
                }
            ),
            "unknown_partner",
        ),
        "injection as type": (value({**pv, "type": INJECTION}), "bad_field"),
        "injection as user_type": (value({**login, "user_type": INJECTION}), "bad_field"),
    }


def hostile_corpus(now: dt.datetime, *, count: int, seed: int) -> list[tuple[bytes | None, str]]:
    """``count`` messages drawn at random from every kind, with the reason each must get."""
    kinds = {**hostile_kinds(now, partner="A1"), **more_kinds(now)}
    rng = random.Random(seed)
    names = sorted(kinds)
    corpus = [kinds[name] for name in names]  # every kind at least once
    while len(corpus) < count - MEGABYTE_PAYLOADS:
        corpus.append(kinds[rng.choice(names)])
    megabyte = json.dumps({"event_id": "big", "type": "pv", "ts": now.isoformat(), "url": "x" * 2**20})
    corpus += [(megabyte.encode(), "too_large")] * MEGABYTE_PAYLOADS
    rng.shuffle(corpus)
    log.info("hostile: corpus of %d messages over %d kinds", len(corpus), len(kinds))
    return corpus


def test_hostile_corpus_is_dead_lettered_with_its_reasons_and_the_admin_escapes_it(
    kafka_settings, children, sizes
):
    create_tree()
    now = timezone.now()
    corpus = hostile_corpus(now, count=sizes.hostile_events, seed=61)
    # Good traffic after the corpus: counted only if the consumer is still up after all of it.
    good = [pv_event(now - dt.timedelta(seconds=n % 300), "A1a", f"u{n % 50}") for n in range(500)]
    producer = KafkaProducer(
        bootstrap_servers=kafka_settings.KAFKA_BOOTSTRAP_SERVERS, linger_ms=20, max_request_size=4 * 2**20
    )
    for n, (value, _) in enumerate(corpus):
        # A key on every message, so that a tombstone (no value) can be sent at all.
        producer.send(kafka_settings.KAFKA_TOPIC, key=str(n % 7).encode(), value=value)
    for value in good:
        producer.send(kafka_settings.KAFKA_TOPIC, key=b"good", value=value)
    producer.flush(timeout=120)
    producer.close()

    # Megabyte payloads take their bytes' time on top of the per-batch cost.
    run = children.run(
        "consume",
        "--batch-size",
        "500",
        "--exit-when-idle",
        "3",
        seconds=patience(len(corpus) + len(good), batch=500, more=3 + 5 * MEGABYTE_PAYLOADS),
    )
    assert run.process.returncode == 0, run.stderr()[-3000:]
    assert "Traceback" not in run.stderr()
    assert reported_count(run.stdout()) == len(good)
    expected: dict[str, int] = {}
    for _, reason in corpus:
        expected[reason] = expected.get(reason, 0) + 1
    assert dead_letters_by_reason() == expected
    from stats.jobs.flush import flush

    flush(include_open=True)
    days = {local_day(now - dt.timedelta(seconds=300)), local_day(now)}
    assert sum(row.pv for day in days for row in [flushed({day}).get("A1a")] if row) == len(good)
    log.info(
        "hostile: %d messages sent, %d dead-lettered with the expected reason, the %d good events after "
        "them counted, 0 lost; reasons %s",
        len(corpus),
        sum(expected.values()),
        len(good),
        dict(sorted(expected.items())),
    )

    staff = create_staff()
    staff.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client = Client()
    client.force_login(staff)
    unknown = DeadLetter.objects.filter(reason="unknown_partner").count()
    pages = math.ceil(unknown / 100)
    seen_escaped = 0
    for page in range(pages):
        response = client.get("/admin/stats/deadletter/", {"reason__exact": "unknown_partner", "p": page + 1})
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert(1)</script>" not in html
        seen_escaped += html.count("&lt;script&gt;alert(1)&lt;/script&gt;")
    assert seen_escaped > 0
    letter = next(
        dl
        for dl in DeadLetter.objects.filter(reason="unknown_partner").only("pk", "raw")
        if b"<script>alert(1)</script>' OR 1=1" in bytes(dl.raw)
    )
    detail = client.get(f"/admin/stats/deadletter/{letter.pk}/change/")
    assert detail.status_code == 200
    assert "<script>alert(1)</script>" not in detail.content.decode()
    log.info("hostile: %d admin list pages and one detail page show the injection strings escaped", pages)
