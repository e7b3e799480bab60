"""The options of ``quality`` with their defaults; ``settings.CPS_QUALITY`` overrides any of them.

Each threshold says why it has its default: a rule that fires on honest traffic teaches staff to ignore it.
"""

from cpsproject.common.conf import AppSettings, Check, positive_int


def _share() -> Check:
    return Check(
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1, "a share 0-1"
    )


def _positive_number() -> Check:
    return Check(
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v > 0, "a positive number"
    )


DEFAULTS = {
    # A view of one openid through one partner this soon after its previous such view is a repeat (a reload,
    # a script); 30 s is the window Post Affiliate Pro and Airbridge cap repeated clicks with.
    "REPEAT_SECONDS": 30,
    # Characters of a user agent matched against the crawler list: real browsers send under 300, and an
    # attacker's 64 KB user agent must not cost 1,500 regular expressions over 64 KB per view.
    "UA_MATCH_CHARS": 256,
    # How many of a day's busiest addresses are shown and measured (the concentration rule's "top 10").
    "TOP_ADDRESSES": 10,
    # The rules judge a partner-day only from this many views on: 3 bot views out of 10 is noise, not a finding.
    "MIN_VIEWS": 100,
    # About half of all web traffic is automated, but a partner's human-facing links should bring little:
    # industry audits flag an affiliate past 20% bot traffic.
    "MAX_AUTOMATED_SHARE": 0.2,
    # Honest visitors seldom reload a landing page within 30 s; past 30% of views, a script is reloading.
    "MAX_REPEAT_SHARE": 0.3,
    # A partner's audience is many households: its 10 busiest addresses bringing over half its views is one
    # office, one proxy or one machine.
    "MAX_TOP_ADDRESSES_SHARE": 0.5,
    # Data-centre and proxy ranges hold no shoppers: past 20% of views from them is hosted traffic (Matomo and
    # Plausible drop these ranges outright).
    "MAX_LISTED_SHARE": 0.2,
    # Seconds from a view to its order under which a person can hardly have chosen and paid (cookie stuffing
    # and click injection fire the view just before the purchase).
    "FAST_ORDER_SECONDS": 10,
    # The fast-orders rule judges a partner-day from this many orders attributed by a view on.
    "FAST_ORDERS_MIN": 5,
    # A partner converting at more than this multiple of the median partner's rate is an outlier.
    "MAX_CONVERSION_RATIO": 5,
    # Partners with at least this many orders a day make the median the conversion rule compares with.
    "MIN_ORDERS": 5,
    # A partner's views of the last hour against the median of the same hour on the 7 days before: beyond this
    # factor up (a spike) or down (a drop) it shows on the dashboard and in /metrics. 3x is PostHog's default
    # sensitivity for anomaly alerts on a weekly baseline; below it, weekday swings alone would trip it.
    "SPIKE_FACTOR": 3,
    # The larger of the hour and its median must reach this many views: 2 views against 0 is no spike.
    "SPIKE_MIN_VIEWS": 100,
    # manage.py health. Minutes a partner-day counted in Redis may wait for the every-minute flush to write
    # it: past this, the admin, the API and the rules judge traffic that old (the same 10 minutes the
    # counters' flush is allowed).
    "HEALTH_MAX_FLUSH_DELAY_MINUTES": 10,
    # Days an open finding may wait for a reviewer: it holds its partner-day's commissions from every statement
    # until someone decides, and a week is a weekly review's rhythm with a margin.
    "HEALTH_MAX_OPEN_FINDING_DAYS": 7,
}

quality_setting = AppSettings(
    "CPS_QUALITY",
    DEFAULTS,
    checks={
        "REPEAT_SECONDS": positive_int(),
        "UA_MATCH_CHARS": positive_int(),
        "TOP_ADDRESSES": positive_int(),
        "MIN_VIEWS": positive_int(),
        "MAX_AUTOMATED_SHARE": _share(),
        "MAX_REPEAT_SHARE": _share(),
        "MAX_TOP_ADDRESSES_SHARE": _share(),
        "MAX_LISTED_SHARE": _share(),
        "FAST_ORDER_SECONDS": positive_int(),
        "FAST_ORDERS_MIN": positive_int(),
        "MAX_CONVERSION_RATIO": _positive_number(),
        "MIN_ORDERS": positive_int(),
        "SPIKE_FACTOR": _positive_number(),
        "SPIKE_MIN_VIEWS": positive_int(),
        "HEALTH_MAX_FLUSH_DELAY_MINUTES": positive_int(),
        "HEALTH_MAX_OPEN_FINDING_DAYS": positive_int(),
    },
)
