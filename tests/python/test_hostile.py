"""Hostile input: keys of every awkward shape on Redis and the Cluster, and a
panic inside the core surfacing as an exception, not a crash."""

import pytest
import redis as redis_py

import ratekeeper
from conftest import redis_targets, unique_prefix

HOSTILE_KEYS = [
    "",
    "x" * 1_000_000,
    "nul\x00inside",
    "line\nbreak\r\n",
    "{brace}",
    "}{",
    "#looks-hashed",
    "caf\u00e9 \U0001f600",
    b"\xff\xfe\x00{not utf-8}",
    bytes(range(256)),
]


@pytest.mark.parametrize("name,url", redis_targets(), ids=[s[0] for s in redis_targets()])
def test_hostile_keys_are_limited_and_stay_small(name, url, redis_url):
    prefix = unique_prefix()
    limiter = ratekeeper.Limiter("1/hour", url, prefix=prefix, on_error="raise", timeout=5)
    for key in HOSTILE_KEYS:
        assert limiter.check(key).allowed, repr(key)[:40]
        assert not limiter.check(key).allowed, repr(key)[:40]
    if name == "redis":
        r = redis_py.Redis.from_url(url)
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        assert len(keys) == len(HOSTILE_KEYS)
        assert max(len(k) for k in keys) <= len(prefix) + 4 + 128, "a long key reached Redis unhashed"


def test_a_panic_in_the_core_is_an_exception():
    with pytest.raises(ratekeeper.RateKeeperError, match="deliberate panic"):
        ratekeeper._ratekeeper._panic_for_tests()
    # and the module keeps working
    assert ratekeeper.Limiter("1/s").check("k").allowed


def test_malformed_rules_and_options_never_crash():
    for rules in ["", ";;;", "1/", "/1s", "1//s", "1/s/s", "1 per", "\x00", "9" * 400 + "/s", "1/1e3s", "NaN/s"]:
        with pytest.raises(ratekeeper.ConfigurationError):
            ratekeeper.Limiter(rules)
    for rules in [[], [()], [(1,)], [(1, 2, 3)], [("1", 2)], [(1, "2")], [None]]:
        with pytest.raises((TypeError, ratekeeper.ConfigurationError)):
            ratekeeper.Limiter(rules)
