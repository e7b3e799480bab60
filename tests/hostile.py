"""A corpus of hostile Kafka message values, each with the dead-letter reason the product must give it.

Written by hand from the event contract (``stats.pipeline.events``): each entry is one kind of thing a buggy client or
an attacker can put on the topic. ``None`` is a tombstone (a message with no value).
"""

import datetime as dt
import json


def _event(ts: dt.datetime, **fields) -> dict:
    return {"event_id": "hostile", "type": "pv", "ts": ts.isoformat(), "openid": "o-h", **fields}


def _login(ts: dt.datetime, **fields) -> dict:
    return {"event_id": "hostile-login", "type": "login", "ts": ts.isoformat(), **fields}


def _json(value) -> bytes:
    return json.dumps(value).encode()


def hostile_kinds(now: dt.datetime, *, partner: str) -> dict[str, tuple[bytes | None, str]]:
    """Return kind -> (message value, expected dead-letter reason); ``partner`` is a real, active code."""
    pv = _event(now, partner=partner)
    drop = {k: v for k, v in pv.items()}
    del drop["event_id"]
    no_ts = {k: v for k, v in pv.items() if k != "ts"}
    return {
        "tombstone": (None, "empty"),
        "empty value": (b"", "empty"),
        "broken json": (b'{"event_id": "x", "type": ', "not_json"),
        "trailing garbage": (_json(pv) + b" <<<", "not_json"),
        "10 KB of nested brackets": (b"[" * 5000 + b"]" * 5000, "not_json"),
        "deeply nested object": (b'{"a":' * 3000 + b"1" + b"}" * 3000, "not_json"),
        "escaped lone surrogate in openid": (_json(pv).replace(b'"o-h"', b'"\\ud800"'), "not_json"),
        "NaN": (_json(pv).replace(b'"o-h"', b"NaN"), "not_json"),
        "number overflowing a double": (_json(pv).replace(b'"o-h"', b"1e400"), "not_json"),
        "not UTF-8": (b'{"event_id": "\xff\xfe"}', "not_utf8"),
        "UTF-8-encoded surrogate": (b'{"event_id": "\xed\xa0\x80"}', "not_utf8"),
        "JSON array": (b'["pv", 1]', "not_object"),
        "JSON string": (b'"pv"', "not_object"),
        "JSON null": (b"null", "not_object"),
        "no event_id": (_json(drop), "missing_field"),
        "no ts": (_json(no_ts), "missing_field"),
        "event_id as object": (_json({**pv, "event_id": {"$gt": ""}}), "bad_field"),
        "event_id with NUL": (_json({**pv, "event_id": "e\u0000x"}), "bad_field"),
        "event_id of 200 characters": (_json({**pv, "event_id": "e" * 200}), "bad_field"),
        "openid as list": (_json({**pv, "openid": ["o-1"]}), "bad_field"),
        "openid with a bell character": (_json({**pv, "openid": "o\u0007"}), "bad_field"),
        "ua as number": (_json({**pv, "ua": 5}), "bad_field"),
        "type as number": (_json({**pv, "type": 1}), "bad_field"),
        "partner as object": (_json({**pv, "partner": {"code": partner}}), "bad_field"),
        "ts as boolean": (_json({**pv, "ts": True}), "bad_ts"),
        "ts as object": (_json({**pv, "ts": {"$date": 1}}), "bad_ts"),
        "ts without offset": (_json({**pv, "ts": now.replace(tzinfo=None).isoformat()}), "bad_ts"),
        "ts overflowing the calendar": (_json({**pv, "ts": "9999-12-31T23:59:59-23:59"}), "bad_ts"),
        "ts as huge epoch": (_json({**pv, "ts": 1e18}), "bad_ts"),
        "ts an hour ahead": (_json({**pv, "ts": (now + dt.timedelta(hours=1)).isoformat()}), "ts_in_future"),
        "ts thirty days old": (_json({**pv, "ts": (now - dt.timedelta(days=30)).isoformat()}), "ts_too_old"),
        "unknown type": (_json({**pv, "type": "click"}), "unknown_type"),
        "unknown partner": (_json({**pv, "partner": "NOPE"}), "unknown_partner"),
        "SQL in partner": (_json({**pv, "partner": "A'; DROP TABLE stats_rawevent;--"}), "unknown_partner"),
        "HTML in partner": (_json({**pv, "partner": "<script>alert(1)</script>"}), "unknown_partner"),
        "70 KB payload": (_json({**pv, "url": "x" * 70_000}), "too_large"),
        "login user_id superscript two": (_json(_login(now, user_type="client", user_id="²")), "bad_field"),
        "login user_id 2**32": (_json(_login(now, user_type="client", user_id=2**32)), "bad_field"),
        "login user_id negative": (_json(_login(now, user_type="client", user_id=-1)), "bad_field"),
        "login user_id fraction": (_json(_login(now, user_type="client", user_id=1.5)), "bad_field"),
        "login user_id boolean": (_json(_login(now, user_type="client", user_id=True)), "bad_field"),
        "login unknown user_type": (_json(_login(now, user_type="alien", user_id=1)), "bad_field"),
        "login user_type as list": (_json(_login(now, user_type=["client"], user_id=1)), "bad_field"),
        "login without user_id": (_json(_login(now, user_type="client")), "missing_field"),
    }
