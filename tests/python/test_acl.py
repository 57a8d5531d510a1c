"""Redis users made with README's own `ACL SETUSER` lines run the whole path:
the app's user checks, peeks, batches, resets and bans through fail2ban; the
admin's user drives Admin and the CLI. A user with one command fewer is
refused, so the lines are not wider than the test shows."""

import re
import shlex
import subprocess

import pytest
import redis

import documentation
from conftest import unique_prefix
from ratekeeper import Admin, Limiter, StorageError, check_all


def readme_line(user: str) -> str:
    found = re.findall(rf"^ACL SETUSER {user} on .*$", documentation.text(), re.M)
    assert len(found) == 1, f"README should give one ACL SETUSER line for {user}"
    return found[0]


@pytest.fixture
def users(redis_url):
    """Users made from README's lines for a fresh prefix: name -> store URL."""
    prefix = unique_prefix()
    server = redis.Redis.from_url(redis_url)
    made = {}
    for role in ("ratekeeper-app", "ratekeeper-admin"):
        line = readme_line(role)
        name = f"{role}-{prefix}"
        words = shlex.split(line.replace(" ~rk:* ", f" ~{prefix}:* "))
        assert words[2] == role
        words[2] = name
        server.execute_command(*words)
        password = next(w[1:] for w in words if w.startswith(">"))
        made[role] = redis_url.replace("redis://", f"redis://{name}:{password}@")
    yield prefix, made
    for role in made:
        server.execute_command("ACL", "DELUSER", f"{role}-{prefix}")


def test_the_app_user_runs_every_check_path(users):
    prefix, url = users
    limiter = Limiter("3/minute", url["ratekeeper-app"], prefix=prefix, on_error="raise",
                      tiers={"pro": "10/minute"})
    assert [limiter.check("user:1").allowed for _ in range(4)] == [True, True, True, False]
    assert limiter.peek("user:1").remaining == 0
    assert limiter.check("user:2", tier="pro").limit == 10
    assert [d.allowed for d in limiter.check_many(["a", "b"])] == [True, True]
    assert [d.allowed for d in check_all([(limiter, "c"), (limiter.with_rules("1/minute", scope="x"), "c")])] == [True, True]
    limiter.reset("user:1")
    assert limiter.check("user:1").allowed
    # fail2ban: a key's ban and an address's ban, then both are refused
    for _ in range(2):
        limiter.penalize("login:eve", maxretry=2, findtime=60, bantime=60)
    assert limiter.check("login:eve").blocked
    for _ in range(2):
        limiter.penalize(ip="203.0.113.9", maxretry=2, findtime=60, bantime=60)
    assert limiter.screen("203.0.113.9").blocked
    # holds of an in-flight rule: taken, listed, extended, released
    export = Limiter("1 concurrent; 3/minute", url["ratekeeper-app"], prefix=prefix, on_error="raise")
    with export.hold("export:1") as lease:
        assert not export.hold("export:1").allowed
        assert [held for held, _ in export.leases("export:1")] == [lease.id]
        assert lease.extend(30) is not None
    assert export.peek("export:1").in_flight == 0
    export.reset("export:1")


def test_the_admin_user_runs_admin_and_the_cli(users):
    prefix, url = users
    admin = Admin(url["ratekeeper-admin"], prefix=prefix)
    admin.block("198.51.100.0/24", ttl=60, reason="acl test")
    admin.safelist("user:ok")
    admin.set_tier("user:3", "pro")
    admin.set_override("user:4", "7/minute")
    admin.set_switches(shadow=True)
    admin.set_switches(shadow=False)
    assert {e["target"] for e in admin.entries()} >= {"198.51.100.0/24", "user:ok"}
    assert [c["action"] for c in admin.history(6)] == ["switches", "switches", "override", "tier", "safelist", "block"]
    assert admin.inspect("user:4") is not None
    assert admin.switches()["enabled"]
    # a key's leases, read and released (the holder is the app's user)
    export = Limiter("1 concurrent", url["ratekeeper-app"], prefix=prefix, on_error="raise", scope="export")
    stuck = export.hold("job:1")
    assert [lease["id"] for lease in admin.inspect("job:1", scope="export")["leases"]] == [stuck.id]
    assert admin.release_lease("job:1", stuck.id, scope="export", reason="acl test")
    assert export.peek("job:1").in_flight == 0
    listed = subprocess.run(["ratekeeper", "list", "--json", "--store", url["ratekeeper-admin"], "--prefix", prefix],
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "198.51.100.0/24" in listed.stdout
    # and the app user sees what the admin wrote
    limiter = Limiter("3/minute", url["ratekeeper-app"], prefix=prefix, on_error="raise", tiers={"pro": "10/minute"})
    assert limiter.check("user:4").limit == 7
    assert limiter.check("user:3").limit == 10
    assert limiter.screen("198.51.100.7").blocked


def test_a_user_without_the_scripts_commands_is_refused(redis_url):
    prefix = unique_prefix()
    server = redis.Redis.from_url(redis_url)
    words = shlex.split(readme_line("ratekeeper-app").replace(" ~rk:* ", f" ~{prefix}:* "))
    words[2] = f"narrow-{prefix}"
    words.remove("+getrange")  # every check reads its log's header
    server.execute_command(*words)
    password = next(w[1:] for w in words if w.startswith(">"))
    try:
        narrow = redis_url.replace("redis://", f"redis://narrow-{prefix}:{password}@")
        with pytest.raises(StorageError, match="(?i)perm|can.t run this command|no permissions"):
            Limiter("3/minute", narrow, prefix=prefix, on_error="raise").check("user:1")
        # and a user confined to its prefix cannot touch another's keys
        app = redis_url.replace("redis://", f"redis://narrow-{prefix}:{password}@")
        with pytest.raises(StorageError, match="(?i)perm|can.t run this command|no permissions"):
            Limiter("3/minute", app, prefix="someone-else", on_error="raise").peek("user:1")
    finally:
        server.execute_command("ACL", "DELUSER", f"narrow-{prefix}")
