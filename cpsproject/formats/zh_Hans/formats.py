"""Simplified Chinese as our staff read numbers: ``50,533``, not Django's ungrouped ``50533``.

Only what differs from Django's own ``zh_Hans`` formats; dates and everything else come from there.
"""

THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
