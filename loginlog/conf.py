"""The options of ``loginlog`` with their defaults; ``settings.CPS_LOGINS`` overrides any of them."""

from cpsproject.common.conf import AppSettings, Check, positive_int

DEFAULTS = {
    "USER_TYPES": ["client", "office"],
    # Redis login keys older than this many days are deleted by the weekly sync (never fewer than 31).
    "RETENTION_DAYS": 62,
    # User ids are bitmap offsets: a day bitmap of one type holds up to MAX_USER_ID / 8 bytes (16 M ids: 2 MB).
    "MAX_USER_ID": 2**24 - 1,
}

login_setting = AppSettings(
    "CPS_LOGINS",
    DEFAULTS,
    checks={
        "RETENTION_DAYS": positive_int(),
        "MAX_USER_ID": positive_int(),
        "USER_TYPES": Check(
            lambda v: bool(v) and all(isinstance(t, str) and t.isidentifier() for t in v),
            "a list of identifiers",
        ),
    },
)
