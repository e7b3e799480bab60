"""Every Redis key of the login bitmaps (fourth design document), on the shared prefix ``{P}``::

{P}:login:{type}:{user_id}:{yyyyMM}   bitmap  bit d = logged in on day d of the month (bit 0 unused)
{P}:login:day:{type}:{yyyyMMdd}       bitmap  bit u = user u logged in that day
{P}:login:index:{yyyyMM}              set     "{type}:{user_id}" that have a month key
{P}:login:months                      zset    months that have keys, score yyyyMM
"""

from cpsproject.common.redis_keys import prefix
from loginlog.conf import login_setting

DAY = 86400


def login_ttl() -> int:
    """Safety TTL of every login key, renewed by each write: a month key is written until its month ends, kept
    for the retention after that, and must outlive several missed weekly syncs (the fourth design document's
    warning: a TTL that beats the sync loses logins)."""
    return (31 + int(login_setting("RETENTION_DAYS")) + 5 * 7) * DAY


def login_month(user_type: str, user_id: int, month_stamp: str) -> str:
    return f"{prefix()}:login:{user_type}:{user_id}:{month_stamp}"


def login_day(user_type: str, day_stamp: str) -> str:
    return f"{prefix()}:login:day:{user_type}:{day_stamp}"


def login_index(month_stamp: str) -> str:
    return f"{prefix()}:login:index:{month_stamp}"


def login_months() -> str:
    return f"{prefix()}:login:months"
