"""The ratekeeper Redis module from Python: README's two lines (build it, load
it) run as written; policies, fail2ban and batches go through it; a Redis
user whose ACL lacks its commands, or a Redis without it, is served by the
script with no error; `redis_module` and `store_stats` say which path ran."""

import os
import re
import shlex
import signal
import subprocess
import time

import pytest
import redis

import ratekeeper
import documentation
from conftest import ROOT, configured, free_port, unique_prefix


def readme_block() -> list:
    """The shell lines of README's "Redis module" block."""
    text = documentation.text()
    found = re.search(r"<!-- module-commands -->\s*```sh\n(.*?)```", text, re.S)
    assert found, "README should give the module's commands in a ```sh block after <!-- module-commands -->"
    return [line for line in found.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_builds_and_loads_the_module(tmp_path):
    build, load = readme_block()
    assert build.startswith("cargo build") and load.startswith("redis-server --loadmodule")
    built = subprocess.run(shlex.split(build), cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-2000:]
    port = free_port()
    pidfile, logfile = tmp_path / "redis.pid", tmp_path / "redis.log"
    # the line as README gives it, in a shell (it names $PWD), then where to listen
    started = subprocess.run(
        f"{load} --port {port} --bind 127.0.0.1 --save '' --daemonize yes --pidfile {pidfile} "
        f"--logfile {logfile} --dir {tmp_path}",
        shell=True, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert started.returncode == 0, started.stderr
    try:
        server = redis.Redis(port=port, socket_connect_timeout=1)
        for _ in range(100):
            try:
                server.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail(f"Redis did not start: {logfile.read_text()[-2000:]}")
        names = [m[b"name"] for m in server.module_list()]
        assert b"ratekeeper" in names
        limiter = ratekeeper.Limiter("3/minute", f"redis://127.0.0.1:{port}/0", prefix=unique_prefix())
        assert [limiter.check("k").allowed for _ in range(4)] == [True, True, True, False]
        assert limiter.store_stats["path"] == "module"
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_policies_fail2ban_and_batches_go_through_the_module():
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    prefix = unique_prefix()
    limiter = ratekeeper.Limiter("2/minute", url, prefix=prefix, tiers={"pro": "5/minute"}, redis_module="require",
                                 controls_refresh=0.1)
    admin = ratekeeper.Admin(url, prefix=prefix, redis_module="require")
    admin.set_tier("user:pro", "pro")
    admin.set_override("user:vip", "4/minute")
    admin.block("user:bad", ttl=60, reason="abuse")
    admin.safelist("user:ok", ttl=60)
    assert sum(limiter.check("user:pro").allowed for _ in range(7)) == 5
    assert sum(limiter.check("user:vip").allowed for _ in range(7)) == 4
    assert limiter.check("user:bad").blocked
    assert all(limiter.check("user:ok").safelisted for _ in range(5))
    assert [d.allowed for d in limiter.check_many(["a", "a", "a", "b"])] == [True, True, False, True]
    for _ in range(3):
        limiter.penalize("login:eve", maxretry=3, findtime=60, bantime=60)
    assert limiter.check("login:eve").blocked
    stats = limiter.store_stats
    assert (stats["path"], stats["script_calls"]) == ("module", 0), stats
    assert stats["module_calls"] >= 25, stats


def test_require_on_a_redis_without_the_module_says_how_to_load_it(redis_url):
    limiter = ratekeeper.Limiter("2/minute", redis_url, prefix=unique_prefix(), redis_module="require",
                                 on_error="raise")
    with pytest.raises(ratekeeper.StorageError, match="no ratekeeper module loaded.*--loadmodule"):
        limiter.check("k")
    # on_error decides, as for any store failure
    lenient = ratekeeper.Limiter("2/minute", redis_url, prefix=unique_prefix(), redis_module="require")
    assert lenient.check("k").degraded
    with pytest.raises(ratekeeper.ConfigurationError, match="invalid redis_module 'yes'"):
        ratekeeper.Limiter("2/minute", redis_url, redis_module="yes")


def test_off_keeps_to_the_script_on_a_redis_with_the_module():
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    limiter = ratekeeper.Limiter("2/minute", url, prefix=unique_prefix(), redis_module="off")
    assert [limiter.check("k").allowed for _ in range(3)] == [True, True, False]
    stats = limiter.store_stats
    assert (stats["path"], stats["module_calls"]) == ("script", 0), stats


def test_a_user_without_the_module_commands_is_served_by_the_script():
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    prefix = unique_prefix()
    text = documentation.text()
    app_line = re.search(r"^ACL SETUSER ratekeeper-app on .*$", text, re.M).group(0)
    module_line = re.search(r"^ACL SETUSER ratekeeper-app \+ratekeeper\.check.*$", text, re.M)
    assert module_line, "README should give the ACL line that adds the module's commands"
    server = redis.Redis.from_url(url)
    name = f"app-{prefix}"
    for line, path in [(app_line, "script"), (module_line.group(0), "module")]:
        words = shlex.split(app_line.replace(" ~rk:* ", f" ~{prefix}:* "))
        words[2] = name
        server.execute_command(*words)
        if path == "module":
            extra = shlex.split(line)
            extra[2] = name
            server.execute_command(*extra)
        password = next(w[1:] for w in words if w.startswith(">"))
        user_url = url.replace("redis://", f"redis://{name}:{password}@")
        limiter = ratekeeper.Limiter("3/minute", user_url, prefix=prefix, on_error="raise", scope=path)
        assert [limiter.check("k").allowed for _ in range(4)] == [True, True, True, False]
        stats = limiter.store_stats
        assert stats["path"] == path, stats
        metered = limiter.with_rules({"calls": "3/minute", "tokens": "100/minute"}, scope=f"{path}-meters")
        checks = [metered.check("k", {"calls": 1, "tokens": 30}).allowed for _ in range(4)]
        assert checks == [True, True, True, False], f"{path}: a metered check as this user"
        server.execute_command("ACL", "DELUSER", name)


def test_the_cli_takes_redis_module():
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    prefix = unique_prefix()
    ran = subprocess.run(["ratekeeper", "check", "k", "--rules", "1/minute", "--store", url, "--prefix", prefix,
                          "--redis-module", "require"], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    bad = subprocess.run(["ratekeeper", "check", "k", "--rules", "1/minute", "--store", url,
                          "--redis-module", "sometimes"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid redis_module 'sometimes'" in bad.stderr, bad.stderr
