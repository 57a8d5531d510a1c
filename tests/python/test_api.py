"""The Python surface: types, errors, conversions, headers."""

import pytest

import ratekeeper
from ratekeeper import ConfigurationError, Decision, Limiter, RateKeeperError, Rule, StorageError


def test_exception_hierarchy():
    assert issubclass(ConfigurationError, RateKeeperError)
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(StorageError, RateKeeperError)
    assert not issubclass(StorageError, ValueError)
    assert ConfigurationError.__module__ == "ratekeeper"


@pytest.mark.parametrize(
    "rules, needle",
    [
        ("0/minute", "0/minute"),
        ("5/fortnight", "fortnight"),
        ("", "empty"),
        ("10/s;20/s", "same window"),
        ("-1/h", "-1/h"),
        ("99999999999999999999/s", "99999999999999999999/s"),
        ("1/400d", "366 days"),
        ([(0, 1.0)], "limit"),
        ([(5, -1)], "window"),
    ],
)
def test_bad_rules_name_the_problem(rules, needle):
    with pytest.raises(ConfigurationError, match=needle):
        Limiter(rules)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"store": "mysql://x"}, "mysql://x"),
        ({"store": "memory://x"}, "memory://x"),
        ({"on_error": "maybe"}, "maybe"),
        ({"prefix": "a{b"}, "prefix"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"pool_size": 0}, "pool_size"),
        ({"max_keys": 0}, "max_keys"),
    ],
)
def test_bad_options_name_the_problem(kwargs, needle):
    with pytest.raises(ConfigurationError, match=needle):
        Limiter("1/s", **kwargs)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda l: l.check(42), "key must be str or bytes, not int"),
        (lambda l: l.check(None), "key must be str or bytes, not NoneType"),
        (lambda l: l.check("k", "1"), "cost must be an int, not str"),
        (lambda l: l.check("k", 1.5), "cost must be an int, not float"),
        (lambda l: l.check("k", True), "cost must be an int, not bool"),
        (lambda l: l.check("k", now="now"), "now must be a float or int"),
        (lambda l: Limiter(12), "rules must be a str"),
        (lambda l: Limiter([object()]), "each rule must be"),
        (lambda l: Limiter("1/s", store=5), "str"),
    ],
)
def test_wrong_types_raise_type_error(call, needle):
    with pytest.raises(TypeError, match=needle):
        call(Limiter("1/s"))


def test_bad_values_raise_configuration_error():
    limiter = Limiter("1/s")
    with pytest.raises(ConfigurationError, match="cost 0"):
        limiter.check("k", 0)
    with pytest.raises(ConfigurationError, match="cost -3"):
        limiter.check("k", -3)
    with pytest.raises(ConfigurationError, match="now"):
        limiter.check("k", now=-1.0)
    with pytest.raises(ConfigurationError, match="now"):
        limiter.check("k", now=float("inf"))


def test_rule_forms():
    expected = [Rule("1/second"), Rule(20, 60), Rule(800, 86400.0)]
    for rules in ["1/s; 20/min, 800/day", ["800/day", (20, 60), Rule(1, 1)], ("20 per minute", "1/s", (800, 86400))]:
        assert Limiter(rules).rules == expected
    assert Rule("5/5min").window == 300.0 and Rule("5/5min").limit == 5
    assert repr(Rule(2, 0.5)) == "Rule('2/500ms')"
    assert len({Rule("1/s"), Rule(1, 1)}) == 1


def test_decision_fields_and_repr():
    limiter = Limiter("1/second; 20/minute")
    d = limiter.check("user:42", now=1000.0)
    assert isinstance(d, Decision) and d and d.allowed
    assert (d.retry_after, d.limit, d.remaining, d.reset_after, d.window) == (0.0, 1, 0, 1.0, 1.0)
    assert [(r.limit, r.window, r.remaining, r.used, r.reset_after) for r in d.rules] == [
        (1, 1.0, 0, 1, 1.0),
        (20, 60.0, 19, 1, 60.0),
    ]
    assert repr(d) == "Decision(allowed=True, retry_after=0.0, limit=1, remaining=0, reset_after=1.0, rule='1/1s')"
    denied = limiter.check("user:42", now=1000.25)
    assert not denied and denied.retry_after == 0.75 and denied.now == 1000.25
    assert "allowed=False, retry_after=0.75" in repr(denied)
    assert repr(denied.rules[1]) == "RuleState(rule='20/1m', remaining=19, reset_after=59.75)"


def test_headers():
    limiter = Limiter("1/second; 20/minute")
    limiter.check("k", now=1700000000.0)
    d = limiter.check("k", now=1700000000.5)
    assert d.headers() == {
        "X-RateLimit-Limit": "1",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Used": "1",
        "X-RateLimit-Reset": "1700000001",
        "RateLimit-Policy": '"1s";q=1;w=1, "1m";q=20;w=60',
        "RateLimit": '"1s";r=0;t=1',
        "Retry-After": "1",
    }
    assert "Retry-After" not in limiter.check("other", now=1700000000.0).headers()


def test_cost_above_every_limit_never_passes():
    d = Limiter("2/s").check("k", 3)
    assert not d.allowed and d.retry_after is None


def test_str_and_bytes_keys_are_the_same_key():
    limiter = Limiter("1/minute")
    assert limiter.check("café", now=1.0)
    assert not limiter.check("café".encode(), now=2.0)
    assert limiter.check(b"\xff\x00\n{}", now=1.0)
    assert not limiter.check(b"\xff\x00\n{}", now=2.0)
    assert limiter.check("", now=1.0)
    assert limiter.check("x" * 1_000_000, now=1.0)
    assert not limiter.check("x" * 1_000_000, now=2.0)


def test_peek_and_reset():
    limiter = Limiter("2/minute")
    assert limiter.peek("k", now=1.0).remaining == 2
    limiter.check("k", now=1.0)
    assert limiter.peek("k", now=2.0).remaining == 1
    assert limiter.peek("k", 2, now=2.0).allowed is False
    limiter.reset("k")
    assert limiter.peek("k", now=3.0).remaining == 2


def test_with_rules_shares_the_store():
    base = Limiter("1/second", "memory://")
    other = base.with_rules("2/minute")
    assert [str(r) for r in other.rules] == ["2/1m"]
    assert other.check("k", now=1.0) and other.check("k", now=2.0)
    assert not other.check("k", now=3.0)


def test_on_error_outcomes_when_redis_is_unreachable():
    dead = "redis://127.0.0.1:1/0"
    allow = Limiter("1/s", dead, on_error="allow", timeout=0.05)
    d = allow.check("k")
    assert d.allowed and d.degraded and allow.error_count == 1
    deny = Limiter("1/s", dead, on_error="deny")
    d = deny.check("k")
    assert not d.allowed and d.degraded and d.retry_after == 1.0
    with pytest.raises(StorageError):
        Limiter("1/s", dead, on_error="raise").check("k")


def test_module_exports():
    assert set(ratekeeper.__all__) <= set(dir(ratekeeper))


def test_one_version_from_the_cargo_workspace():
    """Cargo.toml's [workspace.package] version is the package's, the
    module's, the command line's and the edge server's (the gem's:
    test_api.rb)."""
    import importlib.metadata
    import os
    import subprocess
    import sys

    from conftest import ROOT

    try:
        import tomllib
    except ImportError:  # CPython 3.9 and 3.10: the matrix installs tomli
        import tomli as tomllib

    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        version = tomllib.load(f)["workspace"]["package"]["version"]
    assert ratekeeper.__version__ == version
    assert importlib.metadata.version("ratekeeper") == version
    cli = subprocess.run([sys.executable, "-m", "ratekeeper", "--version"], capture_output=True, text=True, timeout=60)
    assert cli.stdout.strip() == f"ratekeeper {version}", cli
    server = os.environ.get("RATEKEEPER_SERVER")
    if server:
        out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stdout.strip()) == (0, f"ratekeeper-server {version}"), out


def test_check_many_and_check_all_in_one_round_trip(redis_url, prefix):
    limiter = Limiter("2/hour", redis_url, prefix=prefix)
    assert [d.allowed for d in limiter.check_many(["a", "a", b"a", "b"])] == [True, True, False, True]
    per_user = limiter.with_rules("1/hour; 5/day")
    first = ratekeeper.check_all([(limiter, "ip:1"), (per_user, "user:1", 1)])
    second = ratekeeper.check_all([(limiter, "ip:1"), (per_user, "user:1")])
    assert [d.allowed for d in first] == [True, True]
    assert [d.allowed for d in second] == [True, False]
    assert (first[0].limit, first[1].limit) == (2, 1)
    with pytest.raises(TypeError, match="must be a ratekeeper.Limiter"):
        ratekeeper.check_all([("not a limiter", "k")])
    with pytest.raises(TypeError, match="each item"):
        ratekeeper.check_all([(limiter,)])


def test_denial_cache_spares_redis(redis_url, prefix):
    limiter = Limiter("1/hour", redis_url, prefix=prefix)
    assert limiter.check("k") and not limiter.check("k").cached
    attempts = limiter.store_stats["attempts"]
    assert all(not d.allowed and d.cached for d in (limiter.check("k") for _ in range(200)))
    assert limiter.store_stats["attempts"] == attempts
    limiter.reset("k")
    assert limiter.check("k").allowed
    off = Limiter("1/hour", redis_url, prefix=prefix + "-off", denial_cache=0)
    off.check("k")
    before = off.store_stats["attempts"]
    assert not any(off.check("k").cached for _ in range(5))
    assert off.store_stats["attempts"] == before + 5
    with pytest.raises(ConfigurationError, match="denial_cache"):
        Limiter("1/s", denial_cache=-1)


def test_an_outage_is_logged_once(caplog):
    limiter = Limiter("1/s", "redis://127.0.0.1:1/0", on_error="allow")
    with caplog.at_level("WARNING", logger="ratekeeper"):
        for _ in range(5):
            assert limiter.check("k").degraded
    warnings = [r for r in caplog.records if r.name == "ratekeeper"]
    assert len(warnings) == 1 and "checks are allowed" in warnings[0].getMessage()
