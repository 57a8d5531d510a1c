"""What ratekeeper tells people: a Redis password is never shown (not in
ConfigurationError messages, storage errors, repr(), Django's checks or the
CLI); stored text is printed escaped; errors quote what was written and the
real bound; a Django setting's error names the setting, with one check id per
kind, and stops gunicorn from booting instead of answering 500."""

import re
import subprocess
import sys

from django.core.checks import run_checks
from django.test import override_settings

import ratekeeper

SECRET = "hunter2-s3cret"
MALFORMED = f"redis://:{SECRET}@127.0.0.1:notaport/0"
UNREACHABLE = f"redis://:{SECRET}@127.0.0.1:1/0"


def test_errors_and_repr_hide_the_password():
    for url in (MALFORMED, f"rediss://:{SECRET}@h?ssl_ca_certs=/no/such.pem", f"mysql://:{SECRET}@h"):
        try:
            ratekeeper.Limiter("1/s", url)
        except ratekeeper.ConfigurationError as exc:
            assert SECRET not in str(exc) and "***" in str(exc), str(exc)
        else:
            raise AssertionError(f"{url} was accepted")
    limiter = ratekeeper.Limiter("1/s", UNREACHABLE, on_error="raise")
    assert SECRET not in repr(limiter) and ":***@" in repr(limiter)
    try:
        limiter.check("k")
    except ratekeeper.StorageError as exc:
        assert SECRET not in str(exc) and ":***@127.0.0.1:1/0" in str(exc), str(exc)
    else:
        raise AssertionError("an unreachable Redis answered")


def test_django_checks_hide_the_password():
    from django.conf import settings

    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, STORE=MALFORMED)):
        messages = [m for m in run_checks() if m.id.startswith("ratekeeper.E")]
    assert messages and SECRET not in messages[0].msg, [m.msg for m in messages]


def test_the_cli_hides_the_password():
    for url in (MALFORMED, UNREACHABLE):
        done = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--store", url],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode in (1, 2)
        assert SECRET not in done.stdout + done.stderr, done.stderr


def test_list_prints_stored_text_escaped(redis_url, prefix):
    admin = ratekeeper.Admin(redis_url, prefix=prefix)
    admin.block("evil\nsafe   user:1   6d 23h  forged row", reason="x\x1b[2J\x1b[31mred\u202e")
    done = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--store", redis_url, "--prefix", prefix],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout  # the header and one row: nothing forged
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "evil\\nsafe" in lines[1] and "\\x1b[2J" in lines[1]
    as_json = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--json", "--store", redis_url,
                              "--prefix", prefix], capture_output=True, text=True, timeout=60)
    import json

    entry = json.loads(as_json.stdout)[0]
    assert entry["target"].startswith("evil\nsafe") and entry["detail"].startswith("x\x1b[2J"), "JSON stays exact"


def test_errors_quote_what_was_written_and_the_real_bound():
    import pytest

    for kwargs, says in [
        (dict(pool_size=2**64), "invalid pool_size 18446744073709551616: give 1 to 1024"),
        (dict(timeout=1e300), "invalid timeout 1e300"),
    ]:
        with pytest.raises(ratekeeper.ConfigurationError) as raised:
            ratekeeper.Limiter("1/s", **kwargs)
        assert says in str(raised.value), str(raised.value)
    for rules, says in [
        ("18446744073709551616/s", "may be at most"),
        ("1/0.5s", "write 500ms"),
        ("2/minute; 3/60s", "'2/minute' and '3/60s'"),
    ]:
        with pytest.raises(ratekeeper.ConfigurationError, match=re.escape(says)):
            ratekeeper.Limiter(rules)


def test_each_django_setting_error_names_its_setting_and_kind():
    from django.conf import settings

    for change, check_id, named in [
        (dict(BOGUS=1), "ratekeeper.E001", "settings.RATEKEEPER"),
        (dict(TIMEOUT=-1), "ratekeeper.E002", "RATEKEEPER['TIMEOUT']"),
        (dict(STORE="mysql://x"), "ratekeeper.E002", "RATEKEEPER['STORE']"),
        (dict(RULES="5/parsec"), "ratekeeper.E003", "RATEKEEPER['RULES']"),
        (dict(PATHS=[{"path": "/api/", "rules": "x"}]), "ratekeeper.E003", "RATEKEEPER['PATHS'][0]"),
        (dict(TIERS={"pro": "x"}), "ratekeeper.E003", "RATEKEEPER['TIERS']['pro']"),
        (dict(TRUSTED_PROXIES=["nope"]), "ratekeeper.E004", "RATEKEEPER['TRUSTED_PROXIES']"),
        (dict(KEY="bogus:thing"), "ratekeeper.E004", "RATEKEEPER['KEY']"),
        (dict(BLOCKED_STATUS=99), "ratekeeper.E005", "RATEKEEPER['BLOCKED_STATUS']"),
        (dict(FAIL2BAN=[{"name": "x", "paths": ["a"], "maxretry": 0, "findtime": 1, "bantime": 1}]),
         "ratekeeper.E006", "RATEKEEPER['FAIL2BAN'][0]"),
    ]:
        with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, **change)):
            messages = [m for m in run_checks() if m.id.startswith("ratekeeper.E")]
        assert [m.id for m in messages] == [check_id], (change, [(m.id, m.msg) for m in messages])
        assert named in messages[0].msg, messages[0].msg


def test_bad_settings_stop_gunicorn_from_booting(tmp_path):
    import os

    from conftest import ROOT, free_port

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demo.settings", "RATEKEEPER_STORE": "mysql://nowhere",
           "PYTHONPATH": os.path.join(ROOT, "examples", "django_project")}
    done = subprocess.run([sys.executable, "-m", "gunicorn", "-w", "1", "-b", f"127.0.0.1:{free_port()}",
                           "django.core.wsgi:get_wsgi_application()"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, "gunicorn served a site whose settings are bad"
    assert "RATEKEEPER['STORE']" in done.stderr and "mysql://nowhere" in done.stderr, done.stderr[-2000:]


def test_a_database_past_the_servers_says_so_at_once(redis_url):
    import time

    import pytest

    url = redis_url.rsplit("/", 1)[0] + "/99"
    started = time.monotonic()
    with pytest.raises(ratekeeper.StorageError, match="fewer databases"):
        ratekeeper.Limiter("1/s", url, on_error="raise", timeout=2, connect_timeout=2).check("k")
    assert time.monotonic() - started < 1, "no retrying until the connect timeout"
    done = subprocess.run([sys.executable, "-m", "ratekeeper", "list", "--store", url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "fewer databases" in done.stderr, done.stderr
