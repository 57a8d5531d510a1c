"""What the core owns, seen from Python: the options and their defaults
(README lists the same), their checks without a limiter, rules and fail2ban
parameters, the outcome of a decision, and the one HTTP answer."""

import hashlib
import json
import re
import socket
import warnings

import pytest

import ratekeeper
from ratekeeper import ConfigurationError, Fail2Ban, Limiter, Responses, Rule
import documentation


def readme_defaults() -> dict:
    """The option table of README's Python section: option name to default."""
    text = documentation.text()
    table = text[text.index("| option | default | meaning |"):]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", table[: table.index("\n\n")], re.M)
    return dict(rows)


def test_readme_lists_the_cores_defaults():
    shown = {"True": True, "False": False, "{}": {}}
    readme = {name: shown.get(value, json.loads(value) if value[0] in '"0123456789' else value)
              for name, value in readme_defaults().items()}
    assert readme == ratekeeper.DEFAULTS


def test_an_option_not_given_or_none_takes_the_cores_default():
    limiter = Limiter("1/s", None, timeout=None, scope=None, tiers=None, controls=None)
    assert limiter.scope == "" and limiter.tiers == []
    assert repr(limiter) == "Limiter('1/1s', store='memory://')"


def test_an_old_option_name_still_works_and_warns():
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        limiter = Limiter("1/s", policies=False, policy_refresh=5)
    assert sorted(str(w.message).split(";")[0] for w in said) == [
        "the option policies is now called controls",
        "the option policy_refresh is now called controls_refresh",
    ]
    assert all(w.category is DeprecationWarning and w.filename == __file__ for w in said), "at the caller's line"
    assert limiter.check("k").allowed
    with pytest.warns(DeprecationWarning, match="policies_ready is now called controls_ready"):
        assert limiter.policies_ready == limiter.controls_ready
    with pytest.warns(DeprecationWarning, match="policies is now called controls"):
        ratekeeper.check_option("policies", True)
    with pytest.raises(ConfigurationError, match="controls or policies, not both"):
        Limiter("1/s", controls=True, policies=False)


@pytest.mark.parametrize(
    "name, value, error, needle",
    [
        ("timeout", 0, ConfigurationError, "invalid timeout 0"),
        ("timeout", "fast", TypeError, "timeout must be a number of seconds, not str"),
        ("pool_size", 2**200, ConfigurationError, "invalid pool_size"),
        ("pool_size", True, TypeError, "pool_size must be an integer"),
        ("controls_refresh", 0.01, ConfigurationError, "controls_refresh"),
        ("on_error", "explode", ConfigurationError, "'explode'"),
        ("store", "redis://user:hunter2@h:1/0?ssl_certfile=/x", ConfigurationError, "***"),
        ("colour", "blue", ConfigurationError, "unknown option 'colour'"),
        ("tiers", ["free"], TypeError, "tiers must be a dict"),
    ],
)
def test_check_option_names_the_problem(name, value, error, needle):
    with pytest.raises(error) as raised:
        ratekeeper.check_option(name, value)
    assert needle in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_check_option_accepts_what_a_limiter_accepts():
    for name, value in ratekeeper.DEFAULTS.items():
        ratekeeper.check_option(name, value)
    ratekeeper.check_option("tiers", {"pro": "10/s"})
    ratekeeper.check_option("store", "redis://127.0.0.1:1/0")  # checked, not connected to
    ratekeeper.check_option("controls", None)  # None: the default


def test_rules_and_window_names_come_from_the_core():
    assert [str(r) for r in ratekeeper.parse_rules("20/minute; 1/s")] == ["1/1s", "20/1m"]
    assert Rule("5/5min").window_name == "5m" and Rule(2, 0.5).window_name == "500ms"
    with pytest.raises(ConfigurationError, match="fortnight"):
        ratekeeper.parse_rules("5/fortnight")
    assert ratekeeper.scope_name("path:/café x") == "path:/caf__x"


def test_fail2ban_parameters_are_checked_where_made_and_used_by_penalize():
    default = Fail2Ban()
    assert (default.name, default.maxretry, default.findtime, default.bantime) == ("default", 5, 600.0, 3600.0)
    with pytest.raises(ConfigurationError, match="maxretry"):
        Fail2Ban("logins", maxretry=0)
    limiter = Limiter("10/s")
    ban = Fail2Ban("logins", maxretry=2, findtime=60, bantime=60)
    assert limiter.penalize("email=a@b.c", ban=ban, now=1000.0) is False
    assert limiter.penalize("email=a@b.c", ban=ban, now=1001.0) is True
    assert limiter.check("email=a@b.c", now=1002.0).outcome == "blocked"
    with pytest.raises(TypeError, match="not both"):
        limiter.penalize("k", ban=ban, maxretry=3)


def test_each_outcome():
    limiter = Limiter("1/minute")
    admin = limiter.admin()
    assert limiter.check("a", now=1000.0).outcome == "admitted"
    denied = limiter.check("a", now=1001.0)
    assert denied.outcome == "denied" and denied.to_dict()["outcome"] == "denied"
    admin.block("b", now=1000.0)
    assert limiter.check("b", now=1001.0).outcome == "blocked"
    admin.safelist("c", now=1000.0)
    safe = limiter.check("c", now=1001.0)
    assert safe.outcome == "safelisted" and safe.allowed and not safe.blocked
    admin.set_switches(shadow=True)
    shadowed = limiter.check("a", now=1002.0)
    assert shadowed.outcome == "shadowed" and shadowed.allowed and shadowed.shadowed and not shadowed.blocked
    shadow_block = limiter.check("b", now=1002.0)
    assert shadow_block.outcome == "shadowed" and shadow_block.blocked and shadow_block.allowed
    down = Limiter("1/minute", "redis://127.0.0.1:1/0", on_error="deny")
    degraded = down.check("a")
    assert degraded.outcome == "degraded" and not degraded.allowed and degraded.degraded


def test_check_all_takes_a_tier_per_item():
    limiter = Limiter("1/minute", tiers={"pro": "3/minute"})
    items = [(limiter, "k", 1, "pro")] * 3 + [(limiter, "k2", 1, None), (limiter, "k2")]
    decisions = ratekeeper.check_all(items, now=1000.0)
    assert [d.allowed for d in decisions] == [True, True, True, True, False]
    assert decisions[0].tier == "pro" and decisions[3].tier is None


def test_responses_render_one_answer():
    limiter = Limiter("1/minute")
    admitted = limiter.check("k", now=1000.0)
    denied = limiter.check("k", now=1001.0)
    responses = Responses()
    assert (responses.status, responses.blocked_status, responses.headers) == (429, 403, "all")
    passing = responses.answer(admitted)
    assert passing.passes and passing.status is None and passing.body == b""
    assert passing.headers["X-RateLimit-Remaining"] == "0"
    answer = responses.answer(denied)
    assert answer.status == 429 and json.loads(answer.body) == {"error": "rate_limited", "retry_after": 59}
    assert answer.headers["Retry-After"] == "59" and answer.headers["Content-Length"] == str(len(answer.body))
    draft = Responses(headers="draft", status=503).answer(denied)
    assert draft.status == 503 and "X-RateLimit-Limit" not in draft.headers and "RateLimit" in draft.headers
    assert set(Responses(headers="none").answer(denied).headers) == {"Retry-After", "Content-Type", "Content-Length"}
    assert Responses().blocked().body == b'{"error":"blocked"}'
    for given in (passing, answer, draft):  # the ASGI form: every header, lower-case Latin-1 bytes
        assert given.asgi_headers == [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in given.headers.items()]
        assert given.asgi_headers
    with pytest.raises(ConfigurationError, match="'loud'"):
        Responses(headers="loud")
    with pytest.raises(ConfigurationError, match="blocked_status 200"):
        Responses(blocked_status=200)


def test_the_denial_log_line_hashes_keys_unless_told():
    limiter = Limiter("1/minute")
    limiter.check("user:1", now=1000.0)
    denied = limiter.check("user:1", now=1001.0)
    text, fields = Responses().denial_log(denied, "api", "user:1", "GET", "/x")
    digest = "sha256:" + hashlib.sha256(b"user:1").hexdigest()[:16]
    assert text == f'rate_limited scope="api" key="{digest}" limit=1 window=60.0 retry_after=59.0 method="GET" path="/x"'
    assert fields == {"scope": "api", "key": digest, "limit": 1, "window": 60.0, "retry_after": 59.0,
                      "method": "GET", "path": "/x"}
    shown, _ = Responses(log_keys=True).denial_log(denied, "api", b"user:\xff\n", "", "")
    assert 'key="user:\\\\xff\\n"' in shown


@pytest.fixture
def settings():
    """Django's settings (the example project's, as conftest configures them)."""
    from django.conf import settings as django_settings

    return django_settings


def test_django_checks_open_no_store_connection(settings):
    """System checks validate STORE and the rest without connecting: a listener there sees nobody."""
    from django.core.checks import run_checks
    from django.test import override_settings

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        config = dict(settings.RATEKEEPER, STORE=f"redis://127.0.0.1:{port}/0", HEADERS="legacy")
        with override_settings(RATEKEEPER=config):
            assert [e for e in run_checks() if e.id.startswith("ratekeeper")] == []
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


@pytest.mark.parametrize(
    "bad, check_id, needle",
    [
        ({"HEADERS": "loud"}, "ratekeeper.E005", "HEADERS"),
        ({"STATUS": True}, "ratekeeper.E005", "STATUS"),
        ({"DENIAL_CACHE": -1}, "ratekeeper.E002", "DENIAL_CACHE"),
        ({"POOL_SIZE": "many"}, "ratekeeper.E002", "POOL_SIZE"),
        ({"FAIL2BAN": [{"name": "x", "paths": ["a"], "maxretry": 0, "findtime": 1, "bantime": 1}]},
         "ratekeeper.E006", "maxretry"),
    ],
)
def test_django_checks_name_the_new_settings(settings, bad, check_id, needle):
    from django.core.checks import run_checks
    from django.test import override_settings

    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, **bad)):
        errors = [e for e in run_checks() if e.id.startswith("ratekeeper.E")]
    assert len(errors) == 1 and errors[0].id == check_id and needle in errors[0].msg, errors


def test_django_header_style(settings):
    from django.test import Client, override_settings

    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, HEADERS="legacy", PREFIX="legacy-" + str(id(settings)))):
        response = Client(REMOTE_ADDR="198.51.100.77").get("/")
    assert response.status_code == 200
    assert response["X-RateLimit-Limit"] == "5" and "RateLimit-Policy" not in response
