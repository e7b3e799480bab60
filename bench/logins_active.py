"""Users active in a range over 1,000,000 user ids: day bitmaps (BITOP) against the per-user-key baseline
the design document implies (walk every user-month key), on the same data in the same run.

    .venv/bin/python bench/logins_active.py [USERS]
"""

import datetime as dt
import logging
import random
import sys

from common import Timer, clear_prefix, rss_mb
from django_redis import get_redis_connection

from loginlog.realtime import month_bits_to_mask, queue_login
from loginlog.selectors import active_user_ids
from stats import keys

logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("bench.logins")


def main(users: int) -> None:
    clear_prefix()
    client = get_redis_connection("default")
    rng = random.Random(5)
    days = [dt.date(2026, 11, 1) + dt.timedelta(days=n) for n in range(7)]
    expected = set()
    pipe = client.pipeline(transaction=False)
    for user_id in range(users):
        if rng.random() < 0.3:
            day = rng.choice(days)
            queue_login(pipe, user_type="client", user_id=user_id, day=day)
            expected.add(user_id)
        if user_id % 20_000 == 0:
            pipe.execute()
            log.info("loaded %d/%d users", user_id, users)
    pipe.execute()

    runs = []
    for _ in range(5):
        with Timer() as timer:
            found = active_user_ids(user_type="client", start=days[0], end=days[-1])
        runs.append(timer.seconds * 1000)
    assert set(found) == expected

    with Timer() as baseline:
        active = 0
        members = list(client.sscan_iter(keys.login_index("202611"), count=10_000))
        for start in range(0, len(members), 10_000):
            pipe = client.pipeline(transaction=False)
            for member in members[start : start + 10_000]:
                user_type, user_id = member.decode().split(":")
                pipe.get(keys.login_month(user_type, int(user_id), "202611"))
            active += sum(1 for bits in pipe.execute() if month_bits_to_mask(bits) & 0b1111111)
    assert active == len(expected)
    clear_prefix()

    print(f"user ids: {users}  active in 7 days: {len(expected)}")
    print(f"day bitmaps : median {sorted(runs)[2]:8.1f} ms  worst {max(runs):8.1f} ms")
    print(f"per-user keys: {baseline.seconds * 1000:8.1f} ms (walk the month index, GET every key)")
    print(f"speed-up     : {baseline.seconds * 1000 / sorted(runs)[2]:8.1f}x   peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
