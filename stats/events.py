"""The event contract: parse one Kafka message value into an event, or say exactly why it cannot be counted."""

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from loginlog.validation import LoginRejected, validate_login
from partners.selectors import Lineage
from stats.conf import stats_setting
from stats.models import DeadLetter
from stats.timeutil import UTC, from_epoch

Reason = DeadLetter.Reason


@dataclass(frozen=True)
class PageView:
    event_id: str
    ts: dt.datetime
    lineage: Lineage | None  # None: traffic with no partner
    openid: str
    is_bot: bool
    payload: dict = field(repr=False)

    type = "pv"

    @property
    def partner(self) -> str:
        return self.lineage.code if self.lineage else ""


@dataclass(frozen=True)
class Login:
    event_id: str
    ts: dt.datetime
    user_type: str
    user_id: int
    payload: dict = field(repr=False)

    type = "login"


Event = PageView | Login


class Rejected(Exception):
    """The message is a dead letter for ``reason``; the message says what was wrong."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@lru_cache(maxsize=8)
def _bot_regex(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(re.escape(p) for p in patterns), re.IGNORECASE)


def is_bot_user_agent(user_agent: str) -> bool:
    return bool(user_agent) and bool(_bot_regex(tuple(stats_setting("BOT_UA_PATTERNS"))).search(user_agent))


def parse_ts(value: object) -> dt.datetime:
    """Return an aware UTC datetime from ISO-8601 with an offset or from epoch milliseconds."""
    if isinstance(value, bool):
        raise Rejected(Reason.BAD_TS, f"ts must be ISO-8601 or epoch ms, not {value!r}")
    if isinstance(value, int | float):
        try:
            return from_epoch(value / 1000)
        except (OverflowError, OSError, ValueError) as exc:
            raise Rejected(Reason.BAD_TS, f"ts {value!r} is not a usable epoch in ms") from exc
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError as exc:
            raise Rejected(Reason.BAD_TS, f"ts {value[:40]!r} is not ISO-8601") from exc
        if moment.tzinfo is None:
            raise Rejected(Reason.BAD_TS, f"ts {value[:40]!r} has no UTC offset")
        return moment.astimezone(UTC)
    raise Rejected(Reason.BAD_TS, f"ts must be ISO-8601 or epoch ms, not {type(value).__name__}")


def _text(payload: dict, name: str, *, required: bool, limit: int = 128) -> str:
    value = payload.get(name)
    if value is None or value == "":
        if required:
            raise Rejected(Reason.MISSING_FIELD, f"{name} is missing")
        return ""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise Rejected(Reason.BAD_FIELD, f"{name} must be a string")
    value = str(value)
    if len(value) > limit:
        raise Rejected(Reason.BAD_FIELD, f"{name} is longer than {limit} characters")
    return value


def parse_event(raw: bytes, *, lineages: dict[str, Lineage], now: dt.datetime) -> Event:
    """Parse one message value; raise ``Rejected`` with the dead-letter reason when it cannot be counted."""
    if raw is None:
        raise Rejected(Reason.NOT_JSON, "empty message")
    if len(raw) > stats_setting("MAX_EVENT_BYTES"):
        raise Rejected(Reason.TOO_LARGE, f"{len(raw)} bytes is over {stats_setting('MAX_EVENT_BYTES')}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(Reason.NOT_UTF8, str(exc)[:200]) from exc
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise Rejected(Reason.NOT_JSON, str(exc)[:200]) from exc
    if not isinstance(payload, dict):
        raise Rejected(Reason.NOT_OBJECT, f"a JSON {type(payload).__name__}, not an object")
    event_id = _text(payload, "event_id", required=True)
    event_type = _text(payload, "type", required=True, limit=16)
    if "ts" not in payload or payload["ts"] in (None, ""):
        raise Rejected(Reason.MISSING_FIELD, "ts is missing")
    ts = parse_ts(payload["ts"])
    if ts > now + dt.timedelta(seconds=stats_setting("MAX_FUTURE_SECONDS")):
        raise Rejected(Reason.TS_IN_FUTURE, f"ts {ts.isoformat()} is ahead of now {now.isoformat()}")
    if ts < now - dt.timedelta(seconds=stats_setting("MAX_LATENESS_SECONDS")):
        raise Rejected(Reason.TS_TOO_OLD, f"ts {ts.isoformat()} is older than the maximum lateness")
    if event_type == "pv":
        return _page_view(payload, event_id=event_id, ts=ts, lineages=lineages)
    if event_type == "login":
        return _login(payload, event_id=event_id, ts=ts)
    raise Rejected(Reason.UNKNOWN_TYPE, f"type {event_type!r} is neither pv nor login")


def _page_view(payload: dict, *, event_id: str, ts: dt.datetime, lineages: dict[str, Lineage]) -> PageView:
    code = _text(payload, "partner", required=False, limit=64)
    lineage = None
    if code:
        lineage = lineages.get(code)
        if lineage is None:
            raise Rejected(Reason.UNKNOWN_PARTNER, f"partner {code!r} does not exist")
        if not lineage.is_active:
            raise Rejected(Reason.INACTIVE_PARTNER, f"partner {code!r} is inactive")
    user_agent = payload.get("ua")
    return PageView(
        event_id=event_id,
        ts=ts,
        lineage=lineage,
        openid=_text(payload, "openid", required=False),
        is_bot=isinstance(user_agent, str) and is_bot_user_agent(user_agent),
        payload=payload,
    )


def _login(payload: dict, *, event_id: str, ts: dt.datetime) -> Login:
    try:
        user_type, user_id = validate_login(
            user_type=payload.get("user_type"), user_id=payload.get("user_id")
        )
    except LoginRejected as exc:
        raise Rejected(Reason.MISSING_FIELD if exc.missing else Reason.BAD_FIELD, str(exc)) from exc
    return Login(event_id=event_id, ts=ts, user_type=user_type, user_id=user_id, payload=payload)
