"""A Redis password is never shown: not in ConfigurationError messages for a
malformed URL, not in storage errors, not in repr(), not in Django's E001, not
in the CLI's output."""

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


def test_django_e001_hides_the_password():
    from django.conf import settings

    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, STORE=MALFORMED)):
        messages = [m for m in run_checks() if m.id == "ratekeeper.E001"]
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
