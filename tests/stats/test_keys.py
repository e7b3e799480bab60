from stats import keys


def test_every_key_carries_the_prefix_as_one_hash_tag(settings):
    settings.CPS_STATS = {**settings.CPS_STATS, "KEY_PREFIX": "cps"}
    assert keys.pv_bucket("P001", "202611211005") == "{cps}:pv:P001:202611211005"
    assert keys.pv_index() == "{cps}:pv:index"
    assert keys.uv_day("P001", "20261121", "tree") == "{cps}:uv:P001:20261121:tree"
    assert keys.uv_index("20261121") == "{cps}:uv:index:20261121"
    assert keys.offsets("cps-stats", "cps-events") == "{cps}:offsets:cps-stats:cps-events"
    assert keys.ranking_slot("24h", "tree", 1763690400) == "{cps}:rank:24h:tree:slot:1763690400"
    assert keys.series_hash(60, "site") == "{cps}:series:60:site"
    assert keys.login_month("client", 1001, "202611") == "{cps}:login:client:1001:202611"
    assert keys.login_day("client", "20261121") == "{cps}:login:day:client:20261121"


def test_bucket_and_uv_keys_parse_back():
    assert keys.parse_pv_bucket(keys.pv_bucket("P-1.a", "202611211005")) == ("P-1.a", "202611211005")
    assert keys.parse_uv_day(keys.uv_day(keys.SITE, "20261121", "self")) == (keys.SITE, "20261121", "self")
