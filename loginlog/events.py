"""The ``login`` event: its type rules, and how the ingest pipeline reads one (registered in ``apps.py``)."""

import datetime as dt
from dataclasses import dataclass, field

from loginlog.validation import LoginRejected, validate_login
from stats.plugins import Envelope, Reason, Rejected


@dataclass(frozen=True, slots=True)
class Login:
    event_id: str
    ts: dt.datetime
    seconds: int  # ts in whole epoch seconds
    user_type: str
    user_id: int
    payload: str = field(repr=False)

    type = "login"


def parse_login(payload: dict, envelope: Envelope) -> Login:
    """``user_type`` is one of the configured types; ``user_id`` as ``validate_login`` says."""
    try:
        user_type, user_id = validate_login(
            user_type=payload.get("user_type"), user_id=payload.get("user_id")
        )
    except LoginRejected as exc:
        raise Rejected(Reason.MISSING_FIELD if exc.missing else Reason.BAD_FIELD, str(exc)) from exc
    return Login(envelope.event_id, envelope.ts, envelope.seconds, user_type, user_id, envelope.text)
