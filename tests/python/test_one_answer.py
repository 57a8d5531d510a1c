"""Every adapter renders the core's one answer: the WSGI middleware and
Django, each under gunicorn, and the Rack middleware under puma, all limiting
one client with "5/second; 20/minute" on one Redis, over real HTTP, give the
same 429 (status, rate-limit headers in the chosen style, Retry-After, JSON
body) and, once the client's address is blocked, the same 403."""

import os
import sys
import time
import urllib.error
import urllib.request

import pytest

import ratekeeper
from conftest import ROOT, free_port, http_servers, unique_prefix

SERVERS = os.path.join(ROOT, "tests", "python", "servers")
RUBY_SERVERS = os.path.join(ROOT, "tests", "ruby", "servers")
# what an answer is compared by (the servers' own headers, Date, Server... differ)
COMPARED = {"retry-after", "ratelimit-policy", "ratelimit", "content-type", "content-length"}


def get(url: str):
    """(status, lower-cased headers, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


@pytest.fixture
def servers(redis_url, tmp_path):
    """{name: base URL} of the three servers, sharing one Redis and prefix, headers in the "draft" style."""
    prefix = unique_prefix()
    env = {**os.environ, "RK_STORE": redis_url, "RK_PREFIX": prefix, "RK_HEADERS": "draft",
           "RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": prefix, "RATEKEEPER_HEADERS": "draft"}
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "1", "--chdir", SERVERS, "--log-level", "warning"]
    commands = {}
    ports = {name: free_port() for name in ("wsgi", "django", "rack")}
    commands["wsgi"] = [*gunicorn, "-b", f"127.0.0.1:{ports['wsgi']}", "answer_wsgi:app"]
    commands["django"] = [*gunicorn, "-b", f"127.0.0.1:{ports['django']}", "django_wsgi:app"]
    commands["rack"] = ["puma", "-q", "-b", f"tcp://127.0.0.1:{ports['rack']}", os.path.join(RUBY_SERVERS, "answer.ru")]
    with http_servers(commands, ports, env, tmp_path, probe="/health") as urls:
        yield urls, prefix


def compared(answer):
    status, headers, body = answer
    return status, {k: v for k, v in headers.items() if k in COMPARED}, body


def test_every_adapter_gives_the_same_429_and_403(servers, redis_url):
    urls, prefix = servers
    denials = {}
    for name, base in urls.items():
        time.sleep(1.1)  # the /health probe used the 1-second window
        answers = [get(f"{base}/") for _ in range(6)]
        assert [a[0] for a in answers] == [200] * 5 + [429], name
        assert answers[0][1]["ratelimit-policy"] == '"1s";q=5;w=1, "1m";q=20;w=60', name
        assert not any(k.startswith("x-ratelimit") for k in answers[0][1]), f"{name}: draft style has no X-RateLimit-*"
        denials[name] = compared(answers[5])
    assert denials["wsgi"] == denials["django"] == denials["rack"], denials
    status, headers, body = denials["wsgi"]
    assert body == b'{"error":"rate_limited","retry_after":1}'
    assert headers["retry-after"] == "1" and headers["content-type"] == "application/json"

    ratekeeper.Admin(redis_url, prefix=prefix).block("127.0.0.1", ttl=60, reason="test")
    blocks = {}
    deadline = time.monotonic() + 10  # each server reads the address lists again within controls_refresh (2 s)
    while len(blocks) < len(urls) and time.monotonic() < deadline:
        for name, base in urls.items():
            answer = get(f"{base}/")
            if answer[0] == 403:
                blocks[name] = compared(answer)
        time.sleep(0.2)
    assert blocks["wsgi"] == blocks["django"] == blocks["rack"], blocks
    assert blocks["wsgi"][0] == 403 and blocks["wsgi"][2] == b'{"error":"blocked"}'
