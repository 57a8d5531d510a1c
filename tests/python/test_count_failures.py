"""Throttles that count only failed responses, as deployed: "5 failed
logins per 5 minutes per e-mail address" (count = "failures") by Django's
settings and @ratelimit and by the WSGI middleware under gunicorn, by the
ASGI middleware under uvicorn, by the Rack DSL under puma, and by a policy
file in a Rails 6.1 app under puma (`config.ratekeeper.policy`; two workers
each), on one Redis, over real HTTP: a hundred good logins pass, the sixth
bad one is 429, whichever worker answers; another address is untouched. A
FastAPI dependency, which never sees the response, refuses the policy."""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import ROOT, free_port, http_servers, unique_prefix

SERVERS = os.path.join(ROOT, "tests", "python", "servers")
RUBY_SERVERS = os.path.join(ROOT, "tests", "ruby", "servers")


def post(url: str, email: str, password: str) -> int:
    """The status of a login."""
    data = urllib.parse.urlencode({"email": email, "password": password}).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


RAILS_POLICY = """
[store]
url = "{url}"
prefix = "{prefix}"

[[throttle]]
scope = "rails-logins"
rules = "5/5min"
key = "identity:email"
paths = ["/login"]
methods = ["POST"]
count = "failures"
"""


@pytest.fixture
def servers(redis_url, tmp_path):
    prefix = unique_prefix()
    policy = tmp_path / "rails_policy.toml"
    policy.write_text(RAILS_POLICY.format(url=redis_url, prefix=prefix))
    env = {**os.environ, "RK_STORE": redis_url, "RK_PREFIX": prefix,
           "RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": prefix, "EDGE_POLICY": str(policy)}
    ports = {name: free_port() for name in ("django", "wsgi", "asgi", "rack", "rails")}
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "2", "--chdir", SERVERS, "--log-level", "warning"]
    commands = {
        "django": [*gunicorn, "-b", f"127.0.0.1:{ports['django']}", "login_django:app"],
        "wsgi": [*gunicorn, "-b", f"127.0.0.1:{ports['wsgi']}", "login_doors:wsgi"],
        "asgi": [sys.executable, "-m", "uvicorn", "--workers", "2", "--app-dir", SERVERS, "--log-level", "warning",
                 "--port", str(ports["asgi"]), "login_doors:asgi"],
        "rack": ["puma", "-q", "-w", "2", "-b", f"tcp://127.0.0.1:{ports['rack']}",
                 os.path.join(RUBY_SERVERS, "login.ru")],
        "rails": ["puma", "-q", "-w", "2", "-b", f"tcp://127.0.0.1:{ports['rails']}",
                  os.path.join(RUBY_SERVERS, "rails_policy", "config.ru")],
    }
    with http_servers(commands, ports, env, tmp_path, probe="/health") as urls:
        yield urls


def test_good_logins_pass_and_the_sixth_failure_is_refused(servers):
    logins = {"django settings": servers["django"] + "/login", "django @ratelimit": servers["django"] + "/signin",
              "wsgi": servers["wsgi"] + "/login", "asgi": servers["asgi"] + "/login", "rack": servers["rack"] + "/login",
              "rails": servers["rails"] + "/login"}
    for door, url in logins.items():
        ann = f"ann-{door.replace(' ', '-')}@example.com"  # (the WSGI and ASGI doors share one policy, one quota)
        good = [post(url, ann, "right") for _ in range(100)]
        assert good == [200] * 100, f"{door}: every good login passes"
        bad = [post(url, ann, "wrong") for _ in range(6)]
        assert bad == [401] * 5 + [429], f"{door}: the sixth failure is refused"
        assert post(url, ann, "right") == 429, f"{door}: the address is over its failures"
        assert post(url, f"bob-{door.replace(' ', '-')}@example.com", "wrong") == 401, f"{door}: another address is untouched"


def test_a_dependency_refuses_a_throttle_that_counts_responses(servers):
    with urllib.request.urlopen(servers["asgi"] + "/dependency", timeout=10) as response:
        refused = response.read().decode()
    assert "throttle 'logins-email' counts only some responses" in refused, refused
