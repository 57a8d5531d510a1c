"""Policies end to end through the Django middleware against the test Redis:
blocks (keys, addresses, CIDR ranges) and their expiry, safelists, an
override changed by another process, fail2ban and allow2ban, shadow mode,
and the ``ratekeeper`` command line driven as a subprocess."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

import ratekeeper
from ratekeeper.django.conf import get_config
from conftest import unique_prefix


@pytest.fixture
def site(redis_url):
    """The example project's settings on a fresh prefix, policies refreshed every 0.1 s."""
    from django.conf import settings

    config = dict(settings.RATEKEEPER, STORE=redis_url, PREFIX=unique_prefix(), CONTROLS_REFRESH=0.1,
                  FAIL2BAN=[{"name": "scanners", "paths": [r"\.php$", r"^/\.env"], "maxretry": 2,
                             "findtime": 60, "bantime": 1}],
                  ALLOW2BAN=[{"name": "logins", "paths": ["^/login"], "methods": ["POST"], "maxretry": 3,
                              "findtime": 60, "bantime": 60}])
    with override_settings(RATEKEEPER=config):
        yield config


def admin(site):
    """An Admin as another process (the operator's shell) would open it."""
    return ratekeeper.Admin(site["STORE"], prefix=site["PREFIX"])


def cli(site, *words):
    """The ratekeeper tool as a subprocess: (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "ratekeeper", *words, "--store", site["STORE"],
                           "--prefix", site["PREFIX"]], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def settle():
    time.sleep(0.25)  # past CONTROLS_REFRESH: other processes hold address lists for that long


def test_a_blocked_address_gets_403_then_its_block_lapses(site):
    c = Client(REMOTE_ADDR="203.0.113.40")
    assert c.get("/").status_code == 200
    admin(site).block("203.0.113.40", ttl=1, reason="scanner")
    settle()
    response = c.get("/")
    assert response.status_code == 403
    assert json.loads(response.content) == {"error": "blocked"}
    assert Client(REMOTE_ADDR="203.0.113.41").get("/").status_code == 200
    time.sleep(1.0)
    assert c.get("/").status_code == 200, "the block lapsed after its TTL"


def test_a_cidr_block_and_a_safelisted_key(site):
    admin(site).block("198.51.100.0/24", reason="hosting range")
    settle()
    assert Client(REMOTE_ADDR="198.51.100.200").get("/").status_code == 403
    assert Client(REMOTE_ADDR="198.51.101.1").get("/").status_code == 200
    # a safelisted key (the user_or_ip key of an anonymous client) is never limited
    admin(site).safelist("ip:192.0.2.50")
    c = Client(REMOTE_ADDR="192.0.2.50")
    assert all(c.get("/").status_code == 200 for _ in range(30))
    # the exact key is read in the check's own round trip: no wait
    admin(site).block("ip:192.0.2.51")
    assert Client(REMOTE_ADDR="192.0.2.51").get("/").status_code == 403


def test_an_override_set_by_another_process_is_obeyed_on_the_next_request(site):
    c = Client(REMOTE_ADDR="203.0.113.60")
    assert [c.get("/").status_code for _ in range(3)] == [200] * 3, "5/second; 20/minute"
    code, _, err = cli(site, "set-override", "ip:203.0.113.60", "3/minute")
    assert code == 0, err
    response = c.get("/")
    assert response.status_code == 429 and response["X-RateLimit-Limit"] == "3", "the override, at once"
    assert response.wsgi_request.ratelimit.overridden
    assert cli(site, "clear-override", "ip:203.0.113.60")[0] == 0
    # this process remembers its denial for at most the denial cache's cap (1 s)
    time.sleep(1.1)
    decision = c.get("/").wsgi_request.ratelimit
    assert decision.allowed and not decision.overridden and decision.limit in (5, 20), "the configured rules again"


def test_fail2ban_bans_the_address_and_the_ban_lapses(site):
    c = Client(REMOTE_ADDR="203.0.113.70")
    assert c.get("/wp-login.php").status_code == 403, "the bad request itself is refused"
    assert c.get("/").status_code == 200, "one strike does not ban"
    assert c.get("/.env").status_code == 403
    assert c.get("/").status_code == 403, "two strikes within findtime ban the address"
    entries = admin(site).entries()
    assert any(e["target"] == "203.0.113.70/32" and e["detail"] == "fail2ban scanners" for e in entries)
    time.sleep(1.1)
    settle()
    assert c.get("/").status_code == 200, "the ban lapsed after bantime"


def test_allow2ban_lets_requests_through_until_the_ban(site):
    c = Client(REMOTE_ADDR="203.0.113.80")
    statuses = [c.post("/login").status_code for _ in range(3)]
    assert [s != 403 for s in statuses] == [True, True, False], "let through until the strike that bans"
    assert c.get("/").status_code == 403, "and banned for what follows"


def test_the_app_reports_strikes_with_penalize(site, rf=None):
    from django.test import RequestFactory

    from ratekeeper.django import penalize

    request = RequestFactory().post("/login", REMOTE_ADDR="203.0.113.90")
    assert [penalize(request, "logins") for _ in range(3)] == [False, False, True]
    assert Client(REMOTE_ADDR="203.0.113.90").get("/").status_code == 403
    with pytest.raises(ratekeeper.ConfigurationError, match="nope"):
        penalize(request, "nope")


def test_penalize_counts_against_a_policy_files_entry_and_the_proxys_client(redis_url, tmp_path):
    """With POLICY_FILE (tests/cases/penalize.toml), penalize(request, name)
    strikes the file's [[allow2ban]] entry, against the client the trusted
    proxy names."""
    from django.test import RequestFactory

    from ratekeeper.django import penalize

    policy = tmp_path / "policy.toml"
    shared = (Path(__file__).parents[1] / "cases" / "penalize.toml").read_text()
    policy.write_text(f'{shared}\n[store]\nurl = "{redis_url}"\nprefix = "{unique_prefix()}"\n')
    with override_settings(RATEKEEPER={"POLICY_FILE": str(policy)}):
        behind = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.23"}
        request = RequestFactory().post("/login", **behind)
        assert [penalize(request, "logins") for _ in range(2)] == [False, True]
        assert Client(**behind).get("/").status_code == 403, "the client the proxy named is banned"
        assert Client(REMOTE_ADDR="10.0.0.1").get("/").status_code == 200, "not the proxy"
        with pytest.raises(ratekeeper.ConfigurationError, match="no fail2ban or allow2ban entry is named 'nope'"):
            penalize(request, "nope")


def test_a_decorated_view_under_a_policy_file_names_the_proxys_client(redis_url, tmp_path):
    """With POLICY_FILE, @ratelimit(key="ip") and a key function calling
    the config's proxies count the client the file's trusted proxy names,
    never the proxy (which would make every client share one quota)."""
    from django.http import HttpResponse
    from django.test import RequestFactory

    from ratekeeper.django import ratelimit

    policy = tmp_path / "policy.toml"
    shared = (Path(__file__).parents[1] / "cases" / "penalize.toml").read_text()
    policy.write_text(f'{shared}\n[store]\nurl = "{redis_url}"\nprefix = "{unique_prefix()}"\n')
    with override_settings(RATEKEEPER={"POLICY_FILE": str(policy)}):
        seen = []

        def own_key(request):
            seen.append(get_config().proxies.client_ip(request.META["REMOTE_ADDR"],
                                                       request.META.get("HTTP_X_FORWARDED_FOR")))
            return seen[-1]

        @ratelimit("1/minute", key="ip")
        def by_ip(request):
            return HttpResponse("ok")

        @ratelimit("1/minute", key=own_key)
        def by_own(request):
            return HttpResponse("ok")

        for view in (by_ip, by_own):
            statuses = [view(RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=client)).status_code
                        for client in ("198.51.100.1", "198.51.100.2", "198.51.100.1")]
            assert statuses == [200, 200, 429], statuses
        assert seen[:2] == ["198.51.100.1", "198.51.100.2"]


def test_shadow_mode_reports_but_never_denies(site):
    admin(site).set_switches(shadow=True)
    settle()
    c = Client(REMOTE_ADDR="203.0.113.100")
    assert all(c.get("/").status_code == 200 for _ in range(8))
    assert c.get("/").wsgi_request.ratelimit.shadowed
    admin(site).set_switches(shadow=False)
    settle()
    assert c.get("/").status_code == 429


def test_the_command_line(site):
    code, out, _ = cli(site, "block", "203.0.113.111", "--ttl", "3600", "--reason", "abuse", "--json")
    assert code == 0 and json.loads(out)["target"] == "203.0.113.111/32"
    assert cli(site, "safelist", "user:7")[0] == 0
    assert cli(site, "set-tier", "user:8", "pro")[0] == 0
    code, out, _ = cli(site, "list", "--json")
    listed = {(e["kind"], e["target"]) for e in json.loads(out)}
    assert listed == {("blocklist", "203.0.113.111/32"), ("safelist", "user:7"), ("tier", "user:8")}
    code, out, _ = cli(site, "list")
    assert "203.0.113.111/32" in out and "abuse" in out
    code, out, _ = cli(site, "inspect", "203.0.113.111", "--json")
    assert json.loads(out)["address"]["kind"] == "blocklist"
    code, out, _ = cli(site, "inspect", "user:8", "--rules", "5/second", "--json")
    assert json.loads(out)["tier"] == "pro" and json.loads(out)["usage"] == ["5/1s: 0 used, 5 left"]
    assert cli(site, "unblock", "203.0.113.111")[0] == 0
    assert cli(site, "unblock", "203.0.113.111")[0] == 3, "not listed: exit 3"
    code, out, _ = cli(site, "switch", "shadow", "--multiplier", "2", "--json")
    assert code == 0 and json.loads(out) == {"enabled": True, "shadow": True, "multiplier": 2.0}
    assert cli(site, "switch", "unshadow", "--multiplier", "1")[0] == 0
    # bad input: exit 2 with a message naming the problem; a dead store: exit 1
    code, _, err = cli(site, "block", "10.0.0.0/99")
    assert code == 2 and "10.0.0.0/99" in err
    code, _, err = cli(site, "block", "k", "--ttl", "-5")
    assert code == 2 and "ttl" in err
    code, _, err = cli(site, "set-override", "k", "5/fortnight")
    assert code == 2 and "fortnight" in err
    done = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--store", "redis://127.0.0.1:1/0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "store failed" in done.stderr
    done = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--store", "mysql://x"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "mysql://x" in done.stderr


def test_the_command_line_records_each_change_as_the_os_users_and_history_prints_them(site):
    """Every change made by the tool is in the store's audit trail as the OS
    user's, with its --reason; ``history`` prints them newest first (hostile
    text escaped), and an Admin of the application reads the same trail."""
    import getpass

    me = getpass.getuser()
    assert cli(site, "block", "203.0.113.112", "--ttl", "7200", "--reason", "scraper")[0] == 0
    assert cli(site, "unblock", "203.0.113.112", "--reason", "false alarm")[0] == 0
    assert cli(site, "set-tier", "user:8", "pro", "--reason", "paid\r\n\u202e<b>")[0] == 0
    assert cli(site, "switch", "shadow", "--reason", "trial")[0] == 0
    code, out, _ = cli(site, "history", "--json")
    changes = json.loads(out)
    assert code == 0
    assert [(c["actor"], c["action"], c["target"], c["detail"], c["reason"]) for c in changes] == [
        (me, "switches", "", "shadow=1", "trial"),
        (me, "tier", "user:8", "pro", "paid\r\n\u202e<b>"),
        (me, "unblock", "203.0.113.112/32", "lifted", "false alarm"),
        (me, "block", "203.0.113.112/32", "for 2h", "scraper"),
    ]
    code, out, _ = cli(site, "history", "--limit", "2")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and lines[0].split()[:3] == ["WHEN", "WHO", "ACTION"]
    assert "\\r\\n\\u202e<b>" in lines[2] and "\r" not in out, "stored text printed escaped"
    assert cli(site, "history", "--limit", "0")[0] == 2
    admin = ratekeeper.Admin(site["STORE"], prefix=site["PREFIX"], actor="app")
    admin.set_override("user:8", "5/minute")
    assert [(c["actor"], c["action"], c["detail"]) for c in admin.history(1)] == [("app", "override", "5/1m")]
    async def awaited():
        return await admin.ahistory(5)

    assert [c["action"] for c in asyncio.run(awaited())] == [c["action"] for c in admin.history(5)]


def test_a_wrapper_names_the_actor_by_actor_over_the_environment_over_the_os_user(site, monkeypatch):
    """A wrapper that knows who asked names the actor the audit trail records:
    ``--actor NAME`` wins over ``$RATEKEEPER_ACTOR``, which wins over the OS user."""
    import getpass

    monkeypatch.delenv("RATEKEEPER_ACTOR", raising=False)
    assert cli(site, "block", "user:9", "--reason", "abuse")[0] == 0
    monkeypatch.setenv("RATEKEEPER_ACTOR", "oncall:bob")
    assert cli(site, "set-tier", "user:9", "pro")[0] == 0
    assert cli(site, "unblock", "user:9", "--actor", "ticket-42:alice")[0] == 0
    changes = admin(site).history(3)
    assert [(c["actor"], c["action"]) for c in changes] == [
        ("ticket-42:alice", "unblock"), ("oncall:bob", "tier"), (getpass.getuser(), "block")]


def test_who_is_limited_now_from_every_process_on_the_command_line_and_awaited(site):
    """Denials made in two processes (this one and a child's) are summed by
    top_denied and ``ratekeeper top``; hostile keys print escaped."""
    limiter = ratekeeper.Limiter("1/minute", site["STORE"], prefix=site["PREFIX"], scope="login", controls_refresh=0.1)
    for _ in range(3):
        limiter.check("user:\r\n<b>", ip="2001:db8:7:7::1")
    child = ("import sys, time, ratekeeper; l = ratekeeper.Limiter('1/minute', sys.argv[1], prefix=sys.argv[2], "
             "scope='login', controls_refresh=0.1); [l.check('user:x', ip='2001:db8:7:7:ffff::2') for _ in range(4)]; "
             "time.sleep(0.5)")
    subprocess.run([sys.executable, "-c", child, site["STORE"], site["PREFIX"]], check=True, timeout=60)
    admin = ratekeeper.Admin(site["STORE"], prefix=site["PREFIX"])
    deadline = time.monotonic() + 5
    # (a reader may have written part of the denials: wait for all of them)
    while time.monotonic() < deadline and sum(k["count"] for k in admin.top_denied(60)["keys"]) < 5:
        time.sleep(0.05)
    top = admin.top_denied(60)
    assert [(k["scope"], k["key"], k["count"]) for k in top["keys"]] == [("login", "user:x", 3),
                                                                         ("login", "user:\r\n<b>", 2)]
    assert top["networks"] == [{"scope": "login", "network": "2001:db8:7:7::/64", "count": 5}]
    assert top["window"] == 60 and len(top["per_minute"]) in (1, 2)
    assert sum(m["count"] for m in top["per_minute"]) == 5

    async def awaited():
        return await admin.atop_denied(60)

    assert asyncio.run(awaited()) == top
    code, out, _ = cli(site, "top", "--window", "60")
    assert code == 0 and "2001:db8:7:7::/64" in out and "user:\\r\\n<b>" in out and "\r" not in out
    code, out, _ = cli(site, "top", "--window", "60", "--json")
    assert json.loads(out)["keys"][0]["key"] == "user:x"
    assert cli(site, "top", "--window", "0")[0] == 2


def test_the_management_command(site, capsys):
    call_command("ratekeeper", "block", "user:99", "--reason", "spam")
    assert "user:99" in capsys.readouterr().out
    assert any(e["target"] == "user:99" for e in get_config().gate.admin().entries())
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as failure:
        call_command("ratekeeper", "unblock", "user:100")
    assert failure.value.returncode == 3


def test_a_typed_key_that_reads_as_a_range_bans_only_that_key(site):
    limiter = ratekeeper.Limiter("100/minute", site["STORE"], prefix=site["PREFIX"], controls_refresh=0.1)
    for typed in ("0.0.0.0/0", "::/0", "203.0.113.9"):
        assert [limiter.penalize(typed, maxretry=2, findtime=60, bantime=60) for _ in range(2)] == [False, True]
        assert limiter.check(typed).blocked
    settle()
    assert Client(REMOTE_ADDR="203.0.113.9").get("/").status_code == 200, "a typed text banned an address"
    assert Client(REMOTE_ADDR="198.51.100.1").get("/").status_code == 200, "a typed range banned every client"
    assert not [e for e in admin(site).entries() if e["network"] and e["target"].endswith("/0")], "no range listed"
    with pytest.raises(TypeError):
        limiter.penalize("k", ip="203.0.113.9")
    with pytest.raises(ratekeeper.ConfigurationError, match="client address"):
        limiter.penalize(ip="0.0.0.0/0")


def test_fail2ban_and_allow2ban_fail_open_while_redis_is_down(site):
    down = dict(site, STORE="redis://127.0.0.1:1/0", ON_ERROR="allow")
    with override_settings(RATEKEEPER=down):
        c = Client(REMOTE_ADDR="203.0.113.71")
        assert c.get("/x.php").status_code == 403, "a fail2ban probe is refused as ever, not a 500"
        assert c.post("/login", {"email": "a@example.com"}).status_code not in (403, 500), "login stays up"
        response = c.get("/")
        assert response.status_code == 200
        assert "X-RateLimit-Remaining" not in response, "a degraded answer claims no quota"
        assert "RateLimit-Policy" in response
    limiter = ratekeeper.Limiter("1/s", "redis://127.0.0.1:1/0", on_error="allow")
    assert limiter.penalize("k") is False
    assert ratekeeper.Limiter("1/s", "redis://127.0.0.1:1/0", on_error="deny").penalize("k") is True
    with pytest.raises(ratekeeper.StorageError):
        ratekeeper.Limiter("1/s", "redis://127.0.0.1:1/0", on_error="raise").penalize("k")


@pytest.mark.parametrize("typo", ["300.1.2.3", "1.2.3.4 ", "1.2.3", "/24", "fe80::1%eth0"])
def test_the_cli_refuses_a_target_that_reads_as_an_address_but_is_not(site, typo):
    code, _, err = cli(site, "block", typo)
    assert code == 2 and "--key" in err and typo.strip() in err, err
    code, out, err = cli(site, "block", typo, "--key", "--json")
    assert code == 0 and json.loads(out)["network"] is False, err
    assert cli(site, "unblock", typo, "--key")[0] == 0


def test_the_cli_refuses_wide_ranges_without_force_and_memory_stores(site):
    code, _, err = cli(site, "block", "0.0.0.0/0")
    assert code == 2 and "--force" in err, err
    assert not admin(site).entries()
    code, _, err = cli(site, "safelist", "::/0")
    assert code == 2 and "--force" in err, err
    code, _, err = cli(site, "block", "10.0.0.0/7", "--force", "--ttl", "1")
    assert code == 0, err
    assert cli(site, "unblock", "10.0.0.0/7")[0] == 0
    assert cli(site, "block", "10.0.0.0/8")[0] == 0
    assert cli(site, "unblock", "10.0.0.0/8")[0] == 0
    done = subprocess.run([sys.executable, "-m", "ratekeeper", "block", "user:1", "--store", "memory://"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "gone when it exits" in done.stderr, done.stderr
    code, _, err = cli(site, "switch", "status", "--multiplier", "2")
    assert code == 2 and "only reads" in err, err
    assert admin(site).switches()["multiplier"] == 1.0


def test_a_cluster_url_at_a_single_redis_says_so(redis_url):
    single = redis_url.replace("redis://", "redis+cluster://").rsplit("/", 1)[0]
    with pytest.raises(ratekeeper.StorageError, match="for a single Redis use redis://"):
        ratekeeper.Limiter("1/s", single, on_error="raise").check("k")


def test_an_identity_key_ban_never_bans_the_address_it_names(site):
    """README's login pattern under KEY="ip" (every request keyed by its raw
    address): a ban of the identity a client typed, "203.0.113.9", is a ban of
    the key email=203.0.113.9, which no request from that address uses."""
    with override_settings(RATEKEEPER=dict(site, KEY="ip")):
        limiter = ratekeeper.Limiter("100/minute", site["STORE"], prefix=site["PREFIX"])
        typed = ratekeeper.identity(" 203.0.113.9 ")
        assert [limiter.penalize(f"email={typed}", maxretry=2, findtime=60, bantime=60) for _ in range(2)] == [False, True]
        assert limiter.check("email=203.0.113.9").blocked
        settle()
        assert Client(REMOTE_ADDR="203.0.113.9").get("/").status_code == 200


def test_a_key_ban_holds_in_the_scope_that_earned_it(site):
    """A login limiter (scope "login") banning what a client typed, "user:42",
    bans that text for the login limiter only: requests keyed user:42
    elsewhere (another scope, the site's default) go on. The command line
    lists the ban with its scope, inspects and unblocks it by scope."""
    store, prefix = site["STORE"], site["PREFIX"]
    # (no denial cache: the unblock below is made by another process)
    login = ratekeeper.Limiter("100/minute", store, prefix=prefix, scope="login", denial_cache=0)
    api = ratekeeper.Limiter("100/minute", store, prefix=prefix, scope="api", denial_cache=0)
    plain = ratekeeper.Limiter("100/minute", store, prefix=prefix, denial_cache=0)
    assert [login.penalize("user:42", maxretry=2, findtime=60, bantime=60) for _ in range(2)] == [False, True]
    assert login.check("user:42").blocked
    assert api.check("user:42").allowed and plain.check("user:42").allowed
    entries = [e for e in admin(site).entries() if e["target"] == "user:42"]
    assert [(e["kind"], e["scope"]) for e in entries] == [("blocklist", "login")]
    code, out, _ = cli(site, "list")
    assert code == 0 and "login" in out, out
    code, out, _ = cli(site, "inspect", "user:42", "--scope", "login", "--json")
    assert code == 0 and json.loads(out)["scope_blocklist"]["reason"] == "fail2ban default", out
    code, _, err = cli(site, "unblock", "user:42", "--key", "--scope", "api")
    assert code == 3 and "in scope api" in err, err
    code, _, err = cli(site, "unblock", "user:42", "--key", "--scope", "login")
    assert code == 0, err
    assert login.check("user:42").allowed
    code, out, _ = cli(site, "block", "user:7", "--key", "--scope", "api", "--ttl", "60")
    assert code == 0 and api.check("user:7").blocked and plain.check("user:7").allowed
    code, _, err = cli(site, "block", "203.0.113.9", "--scope", "api")
    assert code == 2 and "holds only" in err, err
    # an address ban earned in a scope holds everywhere
    assert [login.penalize(ip="198.51.100.4", maxretry=2, findtime=60, bantime=60) for _ in range(2)] == [False, True]
    settle()
    assert Client(REMOTE_ADDR="198.51.100.4").get("/").status_code == 403


def test_the_command_line_acts_on_a_denied_key_by_the_tag_top_shows(site):
    """Keys over 128 bytes, with braces, and not UTF-8, denied with a client
    address, are rows of ``ratekeeper top`` with a TAG; ``block --tag`` of a
    row's TAG blocks that very key, ``inspect --tag`` shows the block and
    ``unblock --tag`` lifts it (the text shown would name another key)."""
    keys = [b"k" * 200, b"user:{42}", b"tok\xff\xfe"]
    limiter = ratekeeper.Limiter("1/minute", site["STORE"], prefix=site["PREFIX"], controls_refresh=0.1, denial_cache=0)
    for key in keys:
        for _ in range(2):
            limiter.check(key, ip="203.0.113.77")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(admin(site).top_denied(60)["keys"]) < 3:
        time.sleep(0.05)

    def blocked() -> int:
        return sum(limiter.check(key).blocked for key in keys)

    code, out, _ = cli(site, "top", "--window", "60")
    assert code == 0, out
    table = out[out.index("DENIED  SCOPE  KEY"):].splitlines()
    assert table[0].split() == ["DENIED", "SCOPE", "KEY", "TAG"], table
    tags = [line.split()[-1] for line in table[1:4]]
    assert len(set(tags)) == 3 and "#%tok%FF%FE" in tags, tags
    assert "ratekeeper block --tag TAG" in out
    assert sorted(json.loads(cli(site, "top", "--window", "60", "--json")[1])["keys"][i]["tag"]
                  for i in range(3)) == sorted(tags)
    for done, tag in enumerate(tags, 1):
        code, out, err = cli(site, "block", "--tag", tag, "--reason", "denied")
        assert code == 0, err
        assert blocked() == done, tag
        code, out, err = cli(site, "inspect", "--tag", tag)
        assert code == 0 and "blocklist: expires_at=" in out, (out, err)
    assert blocked() == 3 and not any(limiter.check(key).allowed for key in keys)
    for tag in tags:
        code, _, err = cli(site, "unblock", "--tag", tag)
        assert code == 0, err
    assert blocked() == 0 and admin(site).entries() == []
    assert cli(site, "block", "--tag", "{not a stored form}")[0] == 2


def test_every_way_through_the_gate_has_its_reason(redis_url):
    """`verdict.reason` names how each request ends, and the entry or
    throttle it ends by: what every door matches on once."""
    prefix = unique_prefix()
    gate = ratekeeper.Gate({
        "store": {"url": redis_url, "prefix": prefix, "controls_refresh": 0.1},
        "exempt_paths": ["/static"],
        "safelist": [{"name": "up", "paths": ["^/up$"]}],
        "blocklist": [{"name": "admin", "paths": ["^/admin"]}],
        "fail2ban": [{"name": "php", "paths": [r"\.php$"], "maxretry": 2, "findtime": 60, "bantime": 60}],
        "throttle": [{"scope": "trial", "rules": "1/minute", "key": "ip", "paths": ["/trial"], "shadow": True},
                     {"scope": "ip", "rules": "2/minute", "key": "ip"}],
    })

    def ask(path, peer="203.0.113.70"):
        v = gate.decide("GET", path, "example.com", peer, {})
        return v.reason, v.ending, v.safelist, v.blocklist, v.ban, v.banned, v.shadow

    assert ask("/static/a.css") == ("exempt", "pass", None, None, None, False, None)
    assert ask("/up") == ("safelisted", "pass", "up", None, None, False, None)
    assert ask("/admin") == ("blocked", "block", None, "admin", None, False, None)
    assert ask("/x.php") == ("banned", "block", None, None, "php", False, None)
    assert ask("/y.php") == ("banned", "block", None, None, "php", True, None)
    assert ask("/trial", "203.0.113.71") == ("admitted", "pass", None, None, None, False, None)
    assert ask("/trial", "203.0.113.71") == ("shadowed", "pass", None, None, None, False, "trial")
    assert ask("/trial", "203.0.113.71") == ("throttled", "deny", None, None, None, False, None)
    ratekeeper.Admin(redis_url, prefix=prefix).block("203.0.113.72", ttl=60)
    time.sleep(0.25)  # past controls_refresh
    assert ask("/", "203.0.113.72")[:3] == ("blocked", "block", None), "a listed address: no entry of the policy"
    assert "reason='admitted'" in repr(gate.decide("GET", "/", "example.com", "203.0.113.73", {}))
