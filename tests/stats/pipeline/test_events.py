"""The event contract is total: any bytes end as a counted event or a dead letter with a reason.

Property-based (hypothesis): arbitrary bytes, and events whose every field holds any JSON value (every JSON
type, any Unicode with surrogates and NUL, huge and negative numbers, deep nesting, long strings).
"""

import datetime as dt
import json
import uuid

import pytest
from django.db.models import Count
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partners.models import Partner
from partners.selectors import partner_lineages
from stats.models import DeadLetter
from stats.pipeline.archive import MongoArchive, SqlArchive
from stats.pipeline.events import Event, EventReader, Rejected, parse_event
from tests.factories import at, create_tree, feed, pv_event
from tests.hostile import hostile_kinds

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
NOON_MS = int(NOON.timestamp() * 1000)
FIELDS = ["event_id", "type", "ts", "partner", "openid", "url", "ua", "ip", "user_type", "user_id"]
# Hypothesis drives many examples through one database transaction; the fixtures are not per example.
PROPERTY = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


class Nested:
    """A value nested ``depth`` arrays deep, spliced into the message as text (json.dumps would recurse)."""

    def __init__(self, depth: int):
        self.depth = depth

    def __repr__(self) -> str:
        return f"Nested({self.depth})"


deep_nesting = st.builds(Nested, st.integers(min_value=1, max_value=3000))


def parse(raw: bytes | None) -> Event:
    return parse_event(raw, lineages=partner_lineages(), now=NOON)


def base_event(kind: str) -> dict:
    if kind == "login":
        return {
            "event_id": "e-1",
            "type": "login",
            "ts": NOON.isoformat(),
            "user_type": "client",
            "user_id": 7,
        }
    return {"event_id": "e-1", "type": "pv", "ts": NOON.isoformat(), "partner": "A1", "openid": "o-1"}


@pytest.fixture
def tree():
    return create_tree()


def test_every_hostile_kind_becomes_a_dead_letter_with_its_reason(tree):
    kinds = hostile_kinds(NOON, partner="A1")
    assert len(kinds) >= 30
    for kind, (value, reason) in kinds.items():
        with pytest.raises(Rejected) as caught:
            parse(value)
        assert caught.value.reason == reason, kind


def test_hostile_kinds_in_a_batch_are_dead_lettered_and_good_events_all_count(tree):
    kinds = hostile_kinds(NOON, partner="A1")
    good = [pv_event(NOON, "A1", f"u{n}", url="/?q=' OR 1=1;--", ua="<script>x</script>") for n in range(40)]
    result = feed(good + [value for value, _ in kinds.values()], now=NOON)
    assert result.counted == 40
    expected: dict[str, int] = {}
    for _, reason in kinds.values():
        expected[reason] = expected.get(reason, 0) + 1
    assert dict(result.dead) == expected
    assert dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id"))) == expected


@PROPERTY
@given(raw=st.binary(max_size=2000) | st.none())
def test_any_bytes_parse_to_an_event_or_a_rejection(tree, raw):
    try:
        event = parse(raw)
    except Rejected as rejected:
        assert rejected.reason in DeadLetter.Reason.values
    else:
        assert event.event_id


@PROPERTY
@given(
    kind=st.sampled_from(["pv", "login"]),
    name=st.sampled_from(FIELDS),
    value=json_values | deep_nesting,
)
def test_any_json_value_in_any_field_is_counted_and_stored_or_rejected(tree, kind, name, value):
    payload = {**base_event(kind), name: "NESTED" if isinstance(value, Nested) else value}
    if name != "event_id":
        payload["event_id"] = f"h-{uuid.uuid4().hex}"
    raw = json.dumps(payload).encode()  # lone surrogates leave as \ud800 escapes, as a client would send
    if isinstance(value, Nested):
        raw = raw.replace(b'"NESTED"', b"[" * value.depth + b"]" * value.depth)
    try:
        event = parse(raw)
    except Rejected:
        return
    # Whatever parse accepts, every storage layer takes: both archive backends, and the whole pipeline.
    SqlArchive().store([event])
    MongoArchive("mongomock://localhost", "cps_contract").store([event])
    result = feed([raw], now=NOON)
    assert (result.counted, dict(result.dead)) == (1, {})


def outcome(read, text: str):
    """What a parse path makes of ``text``: the event's fields, or the rejection's reason and message."""
    try:
        event = read(text)
    except Rejected as rejected:
        return ("rejected", rejected.reason, rejected.detail)
    if event is None:
        return None
    lineage = getattr(event, "lineage", None)
    return (
        event.type,
        event.event_id,
        event.ts,
        event.seconds,
        lineage and lineage.code,
        event.openid,
        event.is_bot,
        event.payload,
    )


# ISO-8601 text with or without an offset, at any moment, and near the accepted span's edges.
iso_moments = st.datetimes(timezones=st.none() | st.timezones()).map(dt.datetime.isoformat) | st.datetimes(
    min_value=dt.datetime(2026, 11, 10),
    max_value=dt.datetime(2026, 11, 25),
    timezones=st.none() | st.just(dt.UTC),
).map(dt.datetime.isoformat)


@settings(PROPERTY, max_examples=1000)  # no database work per example: cheap to try many
@given(
    name=st.sampled_from(["event_id", "type", "ts", "partner", "openid", "url", "ua", "ip", "extra"]),
    # Strings first: every field of a page view is one. Known codes and types reach the deeper checks.
    value=any_text
    | st.sampled_from(["", "pv", "login", "A", "A1a", "B", "Baiduspider", "x" * 129])
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=NOON_MS - 10**11, max_value=NOON_MS + 10**11)  # around the span's edges
    | iso_moments
    | json_values,
    ts=st.sampled_from([NOON.isoformat(), NOON_MS]) | iso_moments,
)
def test_the_common_page_view_path_reads_what_the_general_path_reads(tree, name, value, ts):
    Partner.objects.filter(code="B").update(is_active=False)
    reader = EventReader(lineages=partner_lineages(), now=NOON)
    payload = {**base_event("pv"), "ts": ts, "ua": "Baiduspider", name: value}
    text = json.dumps(payload, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: as a message value it can only arrive escaped
        text = json.dumps(payload)
    common = outcome(reader._common_page_view, text)
    if common is not None:  # None: the value is not plainly valid, and the general path decides
        assert common == outcome(reader._read_text, text)


def test_the_usual_page_views_take_the_common_path(tree):
    reader = EventReader(lineages=partner_lineages(), now=NOON)
    for ts in (NOON.isoformat(), NOON_MS):
        text = json.dumps({**base_event("pv"), "ts": ts, "url": "/landing", "ua": "Mozilla/5.0", "ip": None})
        assert outcome(reader._common_page_view, text) == (
            "pv",
            "e-1",
            NOON,
            int(NOON.timestamp()),
            "A1",
            "o-1",
            False,
            text,
        )


def test_a_login_user_id_is_bounded_by_the_setting(tree, settings):
    settings.CPS_LOGINS = {**settings.CPS_LOGINS, "MAX_USER_ID": 1000}
    login = {**base_event("login"), "user_id": 1000}
    assert parse(json.dumps(login).encode()).user_id == 1000
    with pytest.raises(Rejected) as caught:
        parse(json.dumps({**login, "user_id": 1001}).encode())
    assert (caught.value.reason, "0 to 1000" in caught.value.detail) == ("bad_field", True)


def test_the_raw_payload_is_archived_as_received(tree):
    raw = (
        b'{"event_id":"kept","type":"pv","ts":"2026-11-21T12:00:00+08:00","partner":"A1","extra":{"$x":[1]}}'
    )
    feed([raw], now=NOON)
    assert [event.payload for event in SqlArchive().events(NOON.date())] == [raw.decode()]


def test_events_near_the_calendar_edges_are_rejected_not_crashing(tree):
    for ts in ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", -(2**62), 2**62]:
        with pytest.raises(Rejected) as caught:
            parse(json.dumps({**base_event("pv"), "ts": ts}).encode())
        assert caught.value.reason in {"bad_ts", "ts_too_old", "ts_in_future"}, ts


def test_day_of_future_event_uses_now_not_the_wall_clock(tree):
    # Accepted up to MAX_FUTURE_SECONDS ahead of the ``now`` the pipeline is given.
    soon = NOON + dt.timedelta(seconds=300)
    assert parse(json.dumps({**base_event("pv"), "ts": soon.isoformat()}).encode()).ts == soon


# NOON is 2026-11-21 12:00 in the business zone (UTC+8): 04:00 UTC, epoch 1,795,233,600 s.
NOON_MS = 1_795_233_600_000
WEEK_MS, TEN_MINUTES_MS = 7 * 86_400_000, 600_000


@pytest.mark.parametrize(
    ("ts", "outcome"),
    [
        (NOON_MS - WEEK_MS - 1, "ts_too_old"),
        (NOON_MS - WEEK_MS, dt.datetime(2026, 11, 14, 4, 0, tzinfo=dt.UTC)),
        (NOON_MS + 1_234, dt.datetime(2026, 11, 21, 4, 0, 1, 234_000, tzinfo=dt.UTC)),
        (NOON_MS + TEN_MINUTES_MS, dt.datetime(2026, 11, 21, 4, 10, tzinfo=dt.UTC)),
        (NOON_MS + TEN_MINUTES_MS + 1, "ts_in_future"),
    ],
)
def test_epoch_ms_is_held_to_the_same_span_as_iso_text_to_the_millisecond(tree, ts, outcome):
    raw = json.dumps({**base_event("pv"), "ts": ts}).encode()
    if isinstance(outcome, str):
        with pytest.raises(Rejected) as caught:
            parse(raw)
        assert caught.value.reason == outcome
        return
    event = parse(raw)
    assert (event.ts, event.seconds) == (outcome, ts // 1000)
