"""The signals' arithmetic, table-driven: automated user agents, addresses and networks, listed ranges."""

import pytest

from quality.signals import Ranges, cidr_range, client_address, is_automated
from quality.tally import count_repeats

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"


@pytest.mark.parametrize(
    "ua, product_bot, automated",
    [
        (CHROME, False, False),
        ("Go-http-client/1.1", False, True),  # on the crawler list, not on the product's own
        ("okhttp/4.9.0", False, True),
        ("Scrapy/2.11 (+https://scrapy.org)", False, True),
        ("anything at all", True, True),  # the product's own list already said bot
        ("", False, False),
        (CHROME + " " * 300 + "Go-http-client/1.1", False, False),  # past UA_MATCH_CHARS: not read
        ("x" * 70_000, False, False),
    ],
)
def test_automated_user_agents(ua, product_bot, automated):
    assert is_automated(ua, product_bot=product_bot) is automated


@pytest.mark.parametrize(
    "text, expected",
    [
        ("203.0.113.7", ("203.0.113.7", "203.0.113.0/24")),
        ("::ffff:203.0.113.7", ("203.0.113.7", "203.0.113.0/24")),  # IPv4-mapped: the IPv4 address
        ("2001:DB8:1:2::5", ("2001:db8:1:2::5", "2001:db8:1::/48")),
        ("2001:db8:1:ffff:1:2:3:4", ("2001:db8:1:ffff:1:2:3:4", "2001:db8:1::/48")),
        ("999.1.1.1", None),
        ("203.0.113", None),
        ("fe80::1%eth0", None),  # a scope id names a link, not a client
        ("203.0.113.7, 10.0.0.1", None),  # a forwarded-for list is not one address
        ("", None),
        ("1" * 5000, None),
        ("\x00", None),
    ],
)
def test_client_address_and_network(text, expected):
    parsed = client_address(text)
    assert (parsed[:2] if parsed else None) == expected


def test_listed_ranges_merge_and_bisect_both_families():
    ranges = Ranges(
        [cidr_range("198.51.100.0/24"), cidr_range("198.51.100.128/25"), cidr_range("2001:db8:aa::/48")]
    )
    assert len(ranges) == 2  # the /25 inside the /24 merged away
    number = lambda text: client_address(text)[2]  # noqa: E731
    assert number("198.51.100.0") in ranges
    assert number("198.51.100.255") in ranges
    assert number("198.51.101.0") not in ranges
    assert number("198.51.99.255") not in ranges
    assert number("2001:db8:aa:1::1") in ranges
    assert number("2001:db8:ab::1") not in ranges
    assert number("::ffff:198.51.100.9") in ranges
    assert number("1.2.3.4") not in Ranges([])


def test_repeats_count_views_within_the_window_of_the_previous_one_of_the_same_buyer():
    views = [(100, "a"), (130, "a"), (161, "a"), (190, "a"), (100, "b"), (100, "b"), (500, "b")]
    # a: 130 (30 s after 100) and 190 (29 s after 161) repeat, 161 (31 s) not; b: the second at 100 repeats
    assert count_repeats(views, 30) == 3


def test_the_crawler_prefilter_changes_no_verdict_of_the_lists_own_examples_nor_of_browsers():
    import random

    from crawleruseragents import CRAWLER_USER_AGENTS_DATA

    from quality.signals import _crawler_matchers

    prefilter, full = _crawler_matchers()
    examples = [ua for entry in CRAWLER_USER_AGENTS_DATA for ua in entry.get("instances", [])]
    assert len(examples) > 2000
    missed = [ua for ua in examples if full.search(ua) and not prefilter.search(ua)]
    assert missed == []
    r = random.Random(7)
    browsers = [
        f"Mozilla/5.0 (Linux; Android {r.randint(5, 14)}; SM-G{r.randint(100, 999)}) AppleWebKit/537.36 "
        f"(KHTML, like Gecko) Chrome/{r.randint(90, 130)}.0.{r.randint(1000, 9999)}.1 Mobile Safari/537.36"
        for _ in range(500)
    ]
    assert [ua for ua in browsers if prefilter.search(ua)] == []  # browsers never pay for the full list


@pytest.mark.parametrize(
    "text", ["0.0.0.0", "1.2.3.4", "255.255.255.255", "10.0.0.1", "01.2.3.4", "256.1.1.1", "1.2.3"]
)
def test_the_ipv4_fast_path_agrees_with_the_ipaddress_module(text):
    import ipaddress

    try:
        expected = str(ipaddress.IPv4Address(text))
    except ValueError:
        expected = None
    parsed = client_address(text)
    assert (parsed[0] if parsed else None) == expected
    if parsed:
        assert parsed[2] == int(ipaddress.IPv6Address(f"::ffff:{text}"))
