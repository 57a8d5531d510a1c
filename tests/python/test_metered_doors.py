"""A throttle with meters at every door that sees the response, as
deployed: an LLM API's "100 requests and 3,000 tokens a minute" per API
key, each call reserving 300 tokens before the app runs and settled to the
tokens its response says it used (`usage`, the X-Tokens-Used header). By
one policy file under the WSGI middleware (gunicorn), the ASGI middleware
(uvicorn), Django's POLICY_FILE (gunicorn) and a Rails 6.1 app's
`config.ratekeeper.policy` (puma), and by the Rack DSL (puma), two workers
each, on one Redis, over real HTTP: calls that use little give their
estimate back (twenty pass where estimates alone would let ten), an
overrun is charged, and the call that no longer fits is 429 whichever
worker answers. A FastAPI dependency, which never sees the response,
refuses the policy."""

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

POLICY = """
exempt_paths = ["/health"]

[store]
url = "{url}"
prefix = "{prefix}"

[[throttle]]
scope = "llm"
key = "header:X-Api-Key"
paths = ["/v1/"]
meters = {{ requests = "100/minute", tokens = "3000/minute" }}
cost = {{ tokens = 300 }}
usage = {{ tokens = "X-Tokens-Used" }}
"""


@pytest.fixture
def servers(redis_url, tmp_path):
    prefix = unique_prefix()
    policy = tmp_path / "metered.toml"
    policy.write_text(POLICY.format(url=redis_url, prefix=prefix))
    env = {**os.environ, "RK_STORE": redis_url, "RK_PREFIX": prefix, "METERED_POLICY": str(policy),
           "EDGE_POLICY": str(policy)}
    ports = {name: free_port() for name in ("wsgi", "asgi", "django", "rack", "rails")}
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "2", "--chdir", SERVERS, "--log-level", "warning"]
    commands = {
        "wsgi": [*gunicorn, "-b", f"127.0.0.1:{ports['wsgi']}", "metered_doors:wsgi"],
        "asgi": [sys.executable, "-m", "uvicorn", "--workers", "2", "--app-dir", SERVERS, "--log-level", "warning",
                 "--port", str(ports["asgi"]), "metered_doors:asgi"],
        "django": [*gunicorn, "-b", f"127.0.0.1:{ports['django']}", "metered_django:app"],
        "rack": ["puma", "-q", "-w", "2", "-b", f"tcp://127.0.0.1:{ports['rack']}",
                 os.path.join(RUBY_SERVERS, "metered.ru")],
        "rails": ["puma", "-q", "-w", "2", "-b", f"tcp://127.0.0.1:{ports['rails']}",
                  os.path.join(RUBY_SERVERS, "rails_policy", "config.ru")],
    }
    with http_servers(commands, ports, env, tmp_path, probe="/health") as urls:
        yield urls, prefix


def call(base: str, key: str, used: int):
    """A call that uses `used` tokens: its status and headers."""
    request = urllib.request.Request(f"{base}/v1/chat?used={used}", data=b"{}", headers={"X-Api-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def settled(meters: ratekeeper.Limiter, key: str, used: int) -> int:
    """Waits (5 s at most) until the key's tokens meter holds `used` tokens
    (a response's end is told after its last byte, so a moment after the
    client has it); the tokens it holds."""
    deadline = time.monotonic() + 5
    while True:
        held = 3000 - meters.peek(key, cost={"tokens": 1}).meters["tokens"][0].remaining
        if held == used or time.monotonic() > deadline:
            return held
        time.sleep(0.02)


def test_each_call_is_charged_what_its_response_says_it_used(servers, redis_url):
    urls, prefix = servers
    meters = ratekeeper.Limiter({"requests": "100/minute", "tokens": "3000/minute"}, store=redis_url,
                                prefix=prefix, scope="llm")
    for door, base in urls.items():
        key = f"key-{door}"
        statuses = [call(base, key, 10)[0] for _ in range(20)]
        assert statuses == [200] * 20, f"{door}: calls that use 10 tokens pass"
        assert settled(meters, key, 200) == 200, f"{door}: each of 20 calls charged 10 tokens, not 300"
        assert call(base, key, 2000)[0] == 200, door
        assert settled(meters, key, 2200) == 2200, f"{door}: an overrun of 1,700 is charged"
        status, headers = call(base, key, 600)
        assert status == 200, f"{door}: 2,200 + 300 fit in 3,000"
        assert settled(meters, key, 2800) == 2800, door
        status, headers = call(base, key, 10)
        assert status == 429, f"{door}: 2,800 + 300 do not fit"
        assert int(headers["Retry-After"]) > 0, door
        assert settled(meters, key, 2800) == 2800, f"{door}: the refused call charged nothing"
        assert call(base, f"other-{door}", 10)[0] == 200, f"{door}: another key is untouched"


def test_a_dependency_refuses_a_throttle_settled_by_the_response(servers):
    urls, _ = servers
    with urllib.request.urlopen(urls["asgi"] + "/dependency", timeout=10) as response:
        refused = response.read().decode()
    assert "throttle 'llm' settles its meter 'tokens' to a response header" in refused, refused


def test_finish_takes_a_responses_headers_as_wsgi_and_asgi_give_them():
    gate = ratekeeper.Gate({"store": {"url": "memory://"}, "throttle": [
        {"scope": "llm", "key": "header:X-Api-Key", "meters": {"requests": "20/minute", "tokens": "200/minute"},
         "cost": {"tokens": 40}, "usage": {"tokens": "X-Tokens-Used"}}]})

    def decided():
        verdict = gate.decide("POST", "/v1/chat", "example.com", "203.0.113.9", [(b"x-api-key", b"k")])
        assert verdict.ending == "pass" and verdict.awaits_end
        return verdict

    decided().finish(200, [("Content-Type", "text/plain"), ("X-Tokens-Used", "10")])  # WSGI's str pairs
    decided().finish(200, [(b"x-tokens-used", b"10")])  # ASGI's bytes pairs
    for bad in (["X-Tokens-Used: 10"], [("X-Tokens-Used",)], [("X-Tokens-Used", 10)], 5):
        with pytest.raises(TypeError, match="pair of str or bytes|not iterable"):
            decided().finish(200, bad)
    # each bad call's reservation kept its estimate: 10 + 10 + 4 x 40 = 180, and 180 + 40 > 200
    assert gate.decide("POST", "/v1/chat", "example.com", "203.0.113.9", [(b"x-api-key", b"k")]).ending == "deny"
    # the consoles read each meter's usage by the scope its log is kept under
    rules = gate.throttle_rules()
    assert rules == {"llm@requests": "20/1m", "llm@tokens": "200/1m"}, rules
    tokens = gate.admin().usage("k", rules["llm@tokens"], scope="llm@tokens")
    assert tokens.rules[0].used == 180, tokens.rules
