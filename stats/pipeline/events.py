"""The event contract: parse one Kafka message value into an event, or say exactly why it cannot be counted.

``parse_event`` is total: whatever bytes arrive (a tombstone with no value included), it returns an event or
raises ``Rejected`` with a dead-letter reason. The rules, and why:

- The value is UTF-8 JSON as RFC 8259 has it, read by orjson: no NaN or Infinity, no lone surrogates (escaped
  or encoded), nesting at most 1,024 deep, numbers that fit a double. Anything else is ``not_json``, so every
  archived payload is text that every backend stores as it is.
- Identifier fields (``event_id``, ``partner``, ``openid``, ``user_type``) are JSON strings, or integers
  where a client may reasonably send a number (``event_id``, ``partner``, ``openid``, ``user_id``). They are
  stored in SQL columns, MongoDB and Redis keys, so they hold no control characters (NUL included) and no
  surrogates, and have a maximum length.
- ``ts`` is an ISO-8601 string with a UTC offset, or epoch milliseconds as a JSON number (not a boolean).
- ``url``, ``ua`` and ``ip`` are optional strings (or null); other fields are kept in the archive and ignored.
- Each type adds its own rules in its parser (``parse_page_view`` here; ``login`` in ``loginlog.events``).
"""

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import cast

import msgspec
import orjson

from cpsproject.common.timeutil import UTC, from_epoch
from partners.selectors import Lineage
from stats.conf import stats_setting
from stats.keys import NO_PARTNER
from stats.models import DeadLetter
from stats.pipeline.registry import Envelope, Event, event_parser, event_types

Reason = DeadLetter.Reason

_from_epoch = dt.datetime.fromtimestamp
_from_iso = dt.datetime.fromisoformat

# C0 controls (NUL included), DEL and surrogates: no storage layer takes all of them in an identifier.
_UNSTORABLE_CHARACTER = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


# Not frozen: a frozen dataclass sets each field through object.__setattr__, a large share of parsing an event.
@dataclass(slots=True)
class PageView:
    event_id: str
    ts: dt.datetime
    seconds: int  # ts in whole epoch seconds: what the counters do their arithmetic on
    lineage: Lineage | None  # None: traffic with no partner
    openid: str
    is_bot: bool
    payload: str = field(repr=False)  # the message value as received (valid UTF-8 JSON)
    # Kept as sent ("" when absent) for the features that judge traffic (quality): each checks its own rules.
    ua: str = field(default="", repr=False)
    ip: str = field(default="", repr=False)
    url: str = ""  # "" when absent: read here so that no feature parses the payload again (attribution)
    partition: int = -1  # the Kafka partition it was read from (set by ``parse_batch``)

    type = "pv"

    @property
    def partner(self) -> str:
        return self.lineage.code if self.lineage else NO_PARTNER


class _PageViewShape(msgspec.Struct, forbid_unknown_fields=True):
    """A ``pv`` event holding only the contract's fields, each of the type most clients send.

    Decoding straight into it costs less than half of building a dict with orjson. It accepts a subset of
    what orjson accepts (RFC 8259, no lone surrogates, and every field typed, as unknown fields are refused),
    so a value it decodes is one the general path would decode the same way.
    """

    event_id: str
    type: str
    ts: int | str
    partner: str | None = None
    openid: str | None = None
    url: str | None = None
    ua: str | None = None
    ip: str | None = None


_decode_page_view_shape = msgspec.json.Decoder(_PageViewShape).decode


class Rejected(Exception):
    """The message is a dead letter for ``reason``; the message says what was wrong."""

    def __init__(self, reason: str, detail: str, *, subject: str = ""):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.subject = subject  # the value at fault where the pipeline acts on it (an unknown partner code)


@lru_cache(maxsize=8)
def _bot_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    regex = re.compile("|".join(re.escape(p) for p in patterns), re.IGNORECASE)

    # A few user agents make most of the traffic: remember the verdict rather than search each time.
    @lru_cache(maxsize=4096)
    def is_bot(user_agent: str) -> bool:
        return bool(regex.search(user_agent))

    return is_bot


def is_bot_user_agent(user_agent: str) -> bool:
    return bool(user_agent) and _bot_matcher(tuple(stats_setting("BOT_UA_PATTERNS")))(user_agent)


def _shown(value: object) -> str:
    """A short, printable rendering of a rejected value for the dead letter's detail."""
    text = value if isinstance(value, str) else type(value).__name__
    return repr(text[:40].encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace"))


def parse_ts(value: object) -> dt.datetime:
    """Return an aware UTC datetime from ISO-8601 with an offset or from epoch milliseconds."""
    if isinstance(value, bool):
        raise Rejected(Reason.BAD_TS, f"ts must be ISO-8601 or epoch ms, not {value!r}")
    if isinstance(value, (int, float)):  # noqa: UP038 (a tuple: ``int | float`` builds a union per call)
        try:
            return from_epoch(value / 1000)
        except (OverflowError, OSError, ValueError) as exc:
            raise Rejected(Reason.BAD_TS, f"ts {value!r} is not a usable epoch in ms") from exc
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
            if moment.tzinfo is None:
                raise Rejected(Reason.BAD_TS, f"ts {_shown(value)} has no UTC offset")
            return moment.astimezone(UTC)
        except (ValueError, OverflowError) as exc:
            raise Rejected(Reason.BAD_TS, f"ts {_shown(value)} is not ISO-8601 within years 1-9999") from exc
    raise Rejected(Reason.BAD_TS, f"ts must be ISO-8601 or epoch ms, not {type(value).__name__}")


def identifier(payload: dict, name: str, *, required: bool, limit: int = 128, numbers: bool = True) -> str:
    """Return the field as a storable string ("" when absent and optional), or raise ``Rejected``."""
    value = payload.get(name)
    if value is None or value == "":
        if required:
            raise Rejected(Reason.MISSING_FIELD, f"{name} is missing")
        return ""
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        allowed = "a string or an integer" if numbers else "a string"
        raise Rejected(Reason.BAD_FIELD, f"{name} must be {allowed}, not {type(value).__name__}")
    if len(value) > limit:
        raise Rejected(Reason.BAD_FIELD, f"{name} is longer than {limit} characters")
    # isprintable() is a C-speed test that rules out every unstorable character (and a few storable ones).
    if not value.isprintable() and _UNSTORABLE_CHARACTER.search(value):
        raise Rejected(Reason.BAD_FIELD, f"{name} holds a control character or a lone surrogate")
    return value


def _optional_text(payload: dict, name: str) -> str:
    value = payload.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Rejected(Reason.BAD_FIELD, f"{name} must be a string, not {type(value).__name__}")
    return value


class EventReader:
    """``parse_event`` for a whole batch: the options, the accepted time span and the bot test resolved once.

    Each field takes an inline fast path when it is already what the rules accept (a short printable string,
    an integer ``ts``) and the rule functions above otherwise, so every reason and message stays theirs.
    """

    def __init__(self, *, lineages: Mapping[str, Lineage], now: dt.datetime) -> None:
        self.lineages = lineages
        self.now = now
        self.max_bytes = stats_setting("MAX_EVENT_BYTES")
        self.earliest = now - dt.timedelta(seconds=stats_setting("MAX_LATENESS_SECONDS"))
        self.latest = now + dt.timedelta(seconds=stats_setting("MAX_FUTURE_SECONDS"))
        self.is_bot = _bot_matcher(tuple(stats_setting("BOT_UA_PATTERNS")))
        # The span in epoch milliseconds, for the integer ``ts`` most clients send.
        self.earliest_ms = math.ceil(self.earliest.timestamp() * 1000)
        self.latest_ms = math.floor(self.latest.timestamp() * 1000)

    def read(self, raw: bytes | None) -> Event:
        """Parse one message value; raise ``Rejected`` with the dead-letter reason when it cannot be counted."""
        if not raw:
            raise Rejected(Reason.EMPTY, "no value (a tombstone)" if raw is None else "an empty value")
        if len(raw) > self.max_bytes:
            raise Rejected(Reason.TOO_LARGE, f"{len(raw)} bytes is over {self.max_bytes}")
        try:
            text = (raw if type(raw) is bytes else bytes(raw)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Rejected(Reason.NOT_UTF8, str(exc)[:200]) from exc
        view = self._common_page_view(text)
        return view if view is not None else self._read_text(text)

    def _read_text(self, text: str) -> Event:
        """The general path of ``read``: any event type, every rule with its reason."""
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise Rejected(Reason.NOT_JSON, str(exc)[:200]) from exc
        if type(payload) is not dict:
            raise Rejected(Reason.NOT_OBJECT, f"a JSON {type(payload).__name__}, not an object")
        get = payload.get
        event_id = get("event_id")
        # A short printable string is what ``identifier`` would return as it is: accepted inline, as each
        # call costs more than the test on this path of every event.
        if not (type(event_id) is str and 0 < len(event_id) <= 128 and event_id.isprintable()):
            event_id = identifier(payload, "event_id", required=True)
        event_type = get("type")
        if not (type(event_type) is str and 0 < len(event_type) <= 16 and event_type.isprintable()):
            event_type = identifier(payload, "type", required=True, limit=16, numbers=False)
        ts = get("ts")
        if type(ts) is int and self.earliest_ms <= ts <= self.latest_ms:
            # Epoch milliseconds inside the accepted span (the common case): whole seconds without a datetime.
            seconds = ts // 1000
            ts = _from_epoch(ts / 1000, UTC)
        else:
            ts = self._checked_ts(ts)
            seconds = math.floor(ts.timestamp())
        parse = event_parser(event_type)
        if parse is None:
            raise Rejected(
                Reason.UNKNOWN_TYPE, f"type {event_type!r} is not one of {', '.join(event_types())}"
            )
        return parse(
            payload,
            Envelope(
                event_id=event_id, ts=ts, text=text, lineages=self.lineages, reader=self, seconds=seconds
            ),
        )

    def _common_page_view(self, text: str) -> PageView | None:
        """The ``pv`` event when it has the common shape and every field is plainly valid, else None.

        Most traffic takes this path; anything unusual (another type, an unknown field, a number where a string
        is expected, a value a rule refuses) returns None and goes the general way, so every rejection keeps
        its reason and message. Mirrors ``read`` and ``parse_page_view``; it never rejects.
        """
        try:
            shape = _decode_page_view_shape(text)
        except msgspec.DecodeError:  # ValidationError included
            return None
        event_id, raw_ts, code, openid = shape.event_id, shape.ts, shape.partner, shape.openid
        if shape.type != "pv" or not (0 < len(event_id) <= 128 and event_id.isprintable()):
            return None
        if type(raw_ts) is int:
            if not self.earliest_ms <= raw_ts <= self.latest_ms:
                return None
            seconds = raw_ts // 1000
            ts = _from_epoch(raw_ts / 1000, UTC)
        else:
            try:
                moment = _from_iso(cast(str, raw_ts))
            except ValueError:
                return None
            if moment.tzinfo is None:
                return None
            try:
                ts = moment.astimezone(UTC)
            except OverflowError:  # near year 1 or 9999
                return None
            if not self.earliest <= ts <= self.latest:
                return None
            seconds = math.floor(ts.timestamp())
        lineage = None
        if code:  # the lineages hold valid codes only: a lookup is the whole test
            lineage = self.lineages.get(code)
            if lineage is None or not lineage.is_active:
                return None
        if openid is None:
            openid = ""
        elif not (len(openid) <= 128 and openid.isprintable()):
            return None
        user_agent = shape.ua
        is_bot = False if not user_agent else self.is_bot(user_agent)
        return PageView(
            event_id,
            ts,
            seconds,
            lineage,
            openid,
            is_bot,
            text,
            user_agent or "",
            shape.ip or "",
            shape.url or "",
        )

    def _checked_ts(self, ts: object) -> dt.datetime:
        """``ts`` as an aware UTC datetime inside the accepted span, or ``Rejected`` with the rule's reason."""
        if type(ts) is int:
            try:
                ts = from_epoch(ts / 1000)
            except (OverflowError, OSError, ValueError):
                ts = parse_ts(ts)  # raises with the rule's message
        elif ts is None or ts == "":
            raise Rejected(Reason.MISSING_FIELD, "ts is missing")
        else:
            ts = parse_ts(ts)
        if ts > self.latest:
            raise Rejected(Reason.TS_IN_FUTURE, f"ts {ts.isoformat()} is ahead of now {self.now.isoformat()}")
        if ts < self.earliest:
            raise Rejected(Reason.TS_TOO_OLD, f"ts {ts.isoformat()} is older than the maximum lateness")
        return ts


def parse_event(raw: bytes | None, *, lineages: Mapping[str, Lineage], now: dt.datetime) -> Event:
    """Parse one message value; raise ``Rejected`` with the dead-letter reason when it cannot be counted."""
    return EventReader(lineages=lineages, now=now).read(raw)


def parse_page_view(payload: dict, envelope: Envelope) -> PageView:
    """The ``pv`` event type (registered by ``stats.apps``)."""
    code = payload.get("partner")
    if not (type(code) is str and 0 < len(code) <= 64 and code.isprintable()):
        code = identifier(payload, "partner", required=False, limit=64)
    lineage = None
    if code:
        lineage = envelope.lineages.get(code)
        if lineage is None:
            raise Rejected(Reason.UNKNOWN_PARTNER, f"partner {code!r} does not exist", subject=code)
        if not lineage.is_active:
            raise Rejected(Reason.INACTIVE_PARTNER, f"partner {code!r} is inactive")
    openid = payload.get("openid")
    if not (type(openid) is str and 0 < len(openid) <= 128 and openid.isprintable()):
        openid = identifier(payload, "openid", required=False)
    url = payload.get("url")
    if type(url) is not str:
        url = _optional_text(payload, "url")
    ip = payload.get("ip")
    if type(ip) is not str:
        ip = _optional_text(payload, "ip")
    user_agent = payload.get("ua")
    if type(user_agent) is not str:
        user_agent = _optional_text(payload, "ua")
    is_bot = envelope.reader.is_bot if envelope.reader else is_bot_user_agent
    return PageView(
        event_id=envelope.event_id,
        ts=envelope.ts,
        seconds=envelope.seconds,
        lineage=lineage,
        openid=openid,
        is_bot=bool(user_agent) and is_bot(user_agent),
        payload=envelope.text,
        ua=user_agent,
        ip=ip,
        url=url,
    )
