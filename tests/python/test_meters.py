"""Meters from Python: a limiter of several named rule sets (an LLM API's
requests and tokens) whose check charges each its own units and logs on all
of them or on none, in one round trip; reservations settled per meter; the
headers naming the binding meter; bad costs named."""

import asyncio
import threading

import pytest
import redis

from conftest import configured, unique_prefix
from ratekeeper import ConfigurationError, Limiter, RateLimitExceeded

T = 1_800_000_000.0
METERS = {"requests": "3/minute", "tokens": "100/minute; 1000/day"}


def left(limiter, key, now=T):
    """Each meter's remaining units in its shortest window."""
    d = limiter.peek(key, {"requests": 1, "tokens": 1}, now=now)
    return d.meters["requests"][0].remaining, d.meters["tokens"][0].remaining


def test_a_check_is_all_or_nothing_across_the_meters(store):
    limiter = Limiter(METERS, store, prefix=unique_prefix())
    assert list(limiter.meters) == ["requests", "tokens"]
    for i in range(2):
        assert limiter.check("llm", {"requests": 1, "tokens": 40}, now=T + i)
    refused = limiter.check("llm", {"requests": 1, "tokens": 40}, now=T + 2)
    assert not refused and refused.meter == "tokens"
    assert refused.retry_after == 58.0, "when the first 40 tokens leave the minute"
    assert left(limiter, "llm", T + 2) == (1, 20), "a request refused for tokens is not spent"
    assert refused.headers()["RateLimit-Policy"] == (
        '"requests-1m";q=3;w=60, "tokens-1m";q=100;w=60, "tokens-1d";q=1000;w=86400'
    )
    assert refused.headers()["RateLimit"].startswith('"tokens-1m";r=20;')
    assert refused.to_dict()["meter"] == "tokens" and "rule='tokens 100/1m'" in repr(refused)

    assert limiter.check("llm", {"requests": 1, "tokens": 10}, now=T + 3)
    out_of_requests = limiter.check("llm", {"requests": 1, "tokens": 1}, now=T + 4)
    assert not out_of_requests and out_of_requests.meter == "requests"
    assert left(limiter, "llm", T + 4) == (0, 10), "tokens refused for a request are not spent"
    tokens_only = limiter.check("llm", {"tokens": 10}, now=T + 5)
    assert tokens_only and list(tokens_only.meters) == ["tokens"], "a meter not charged is not consulted"
    limiter.reset("llm")
    assert left(limiter, "llm") == (3, 100)


@pytest.mark.parametrize("server", ["script", "module"])
def test_a_metered_check_is_one_round_trip(server, own_redis):
    if server == "script":
        url = f"redis://127.0.0.1:{own_redis[0]}/0"
    else:
        url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    con = redis.Redis.from_url(url)
    limiter = Limiter(METERS, url, prefix=unique_prefix())
    limiter.check("warm", {"requests": 1, "tokens": 1})

    def calls():
        stats = con.info("commandstats")
        asked = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_ratekeeper.check", "cmdstat_ratekeeper.meters")
        return sum(v["calls"] for k, v in stats.items() if k in asked)

    before = calls()
    limiter.check("k", {"requests": 1, "tokens": 50})
    checked = calls()
    r = limiter.reserve("k", {"requests": 1, "tokens": 40})
    reserved = calls()
    r.settle(tokens=5)
    assert (checked - before, reserved - checked, calls() - reserved) == (1, 1, 1)
    assert left(limiter, "k", now=None) == (1, 45), "50 tokens checked, 5 of the 40 reserved kept"
    if server == "script":
        # (every meter on the server clock reads it once, as the module's command does)
        times = lambda: con.info("commandstats").get("cmdstat_time", {}).get("calls", 0)  # noqa: E731
        before = times()
        limiter.check("k", {"requests": 1, "tokens": 1})
        assert times() - before == 1, "a check of two meters asks Redis for the time once"


def test_reservations_settle_per_meter(store):
    limiter = Limiter(METERS, store, prefix=unique_prefix())
    with limiter.reserve("job", {"requests": 1, "tokens": 80}, now=T) as r:
        assert r.estimate == {"requests": 1, "tokens": 80}
        assert not limiter.check("job", {"requests": 1, "tokens": 30}, now=T + 1)
        after = r.settle(tokens=15, now=T + 2)
    assert r.refunded == {"tokens": 65} and r.over == {"tokens": 0}
    assert after.meters["tokens"][0].remaining == 85
    assert left(limiter, "job", T + 2) == (2, 85)
    with pytest.raises(ConfigurationError, match="settles once"):
        r.settle(tokens=1)
    second = limiter.reserve("job", {"requests": 1, "tokens": 80}, now=T + 3)
    second.settle({"tokens": 100}, requests=2, now=T + 3)
    assert second.over == {"requests": 1, "tokens": 20}, "overruns are charged, never refused"
    assert left(limiter, "job", T + 3) == (0, 0)
    with pytest.raises(RateLimitExceeded, match="1 requests and 80 tokens"):
        with limiter.reserve("job", {"requests": 1, "tokens": 80}, now=T + 3):
            pytest.fail("a refused reservation runs no work")
    gone = limiter.reserve("other", {"requests": 1, "tokens": 30}, now=T)
    gone.cancel()
    assert gone.refunded == {"requests": 1, "tokens": 30} and left(limiter, "other") == (3, 100)


def test_async_metered_checks_and_settles(store):
    async def run():
        limiter = Limiter(METERS, store, prefix=unique_prefix())
        assert await limiter.acheck("a", {"requests": 1, "tokens": 60}, now=T)
        assert not await limiter.acheck("a", {"requests": 1, "tokens": 60}, now=T)
        async with await limiter.areserve("a", {"requests": 1, "tokens": 30}, now=T) as r:
            await r.asettle(tokens=10, now=T)
        r2 = await limiter.areserve("a", {"requests": 1, "tokens": 5}, now=T)
        await r2.acancel()
        return left(limiter, "a")

    assert asyncio.run(run()) == (1, 30)


def test_bad_meters_and_costs_are_named():
    limiter = Limiter(METERS)
    for cost, error, match in [
        (None, ConfigurationError, r"has meters \(requests, tokens\)"),
        (5, ConfigurationError, r"has meters \(requests, tokens\)"),
        ({"token": 1}, ConfigurationError, r"unknown meter 'token': this limiter's meters are \[requests, tokens\]"),
        ({"tokens": -1}, ConfigurationError, "invalid cost -1 for meter 'tokens'"),
        ({"tokens": 0}, ConfigurationError, "at least one meter at least 1 unit"),
        ({"tokens": True}, TypeError, "the cost of meter 'tokens' must be an int"),
        ({"tokens": "1"}, TypeError, "must be an int"),
        ({1: 1}, TypeError, "a meter's name must be a str"),
        ({"tok\x00ens\r\n": 1}, ConfigurationError, "unknown meter"),
    ]:
        with pytest.raises(error, match=match):
            limiter.check("k", cost)
    assert limiter.check("k", {"tokens": 2**200}).retry_after is None, "a cost past every limit never passes"
    for rules, match in [
        ({}, "at least one"),
        ({"a b": "1/s"}, "invalid meter name 'a b'"),
        ({"é": "1/s"}, "invalid meter name"),
        ({"x": "nonsense"}, "nonsense"),
    ]:
        with pytest.raises(ConfigurationError, match=match):
            Limiter(rules)
    with pytest.raises(ConfigurationError, match="meters or tiers"):
        Limiter({"x": "1/s"}, tiers={"pro": "5/s"})
    with pytest.raises(ConfigurationError, match="has no meters"):
        Limiter("1/s").check("k", {"tokens": 1})
    r = limiter.reserve("k", {"requests": 1, "tokens": 1})
    with pytest.raises(TypeError, match="not both"):
        r.settle(3, tokens=1)
    with pytest.raises(TypeError, match="what the work cost"):
        r.settle()
    with pytest.raises(ConfigurationError, match="0 or more"):
        r.settle(tokens=-1)
    assert not r.settled, "a refused argument settles nothing"


def test_threads_released_at_once_never_spend_one_meter_alone(store):
    limiter = Limiter(METERS, store, prefix=unique_prefix())
    start = threading.Barrier(8)
    admitted = []

    def work(i):
        start.wait(timeout=10)
        for j in range(5):
            tokens = 7 + (i * 5 + j) % 23
            if limiter.check("race", {"requests": 1, "tokens": tokens}, now=T):
                admitted.append(tokens)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a check hung"
    assert 1 <= len(admitted) <= 3 and sum(admitted) <= 100
    assert left(limiter, "race") == (3 - len(admitted), 100 - sum(admitted))


def test_hostile_keys_are_metered_as_any_key(store):
    limiter = Limiter(METERS, store, prefix=unique_prefix())
    for key in (b"\xff\xfe", b"a\x00b", "line\r\nbreak", "café", "{slot}", ""):
        assert limiter.check(key, {"requests": 1, "tokens": 60}, now=T)
        assert not limiter.check(key, {"requests": 1, "tokens": 60}, now=T)
        assert left(limiter, key) == (2, 40)


def test_a_decorated_function_takes_a_cost_per_meter():
    limiter = Limiter(METERS)

    @limiter.limited("fn", cost={"requests": 1, "tokens": 60}, wait=False)
    def call():
        return "called"

    assert call() == "called"
    with pytest.raises(RateLimitExceeded):
        call()


def test_a_decorated_call_reserves_its_estimate_and_settles_to_its_result():
    limiter = Limiter(METERS)
    used = iter([15, 30, 5])

    @limiter.limited("api", cost={"requests": 1, "tokens": 60}, wait=False,
                     settle=lambda reply: {"tokens": reply["tokens"]})
    def complete():
        return {"tokens": next(used)}

    assert complete() == {"tokens": 15}
    assert complete() == {"tokens": 30}, "the 45 tokens given back let the second estimate in"
    assert left(limiter, "api", now=None) == (1, 55)

    @limiter.limited("api", cost={"requests": 1, "tokens": 50}, wait=False,
                     settle=lambda reply: {"tokens": reply["tokens"]})
    async def acomplete():
        return {"tokens": next(used)}

    assert asyncio.run(acomplete()) == {"tokens": 5}
    assert left(limiter, "api", now=None) == (0, 50)
    with pytest.raises(RateLimitExceeded):
        complete()


def test_a_reservation_waits_for_its_slot_when_asked():
    import time

    limiter = Limiter({"requests": "2/300ms", "tokens": "100/minute"})
    for _ in range(2):
        assert limiter.reserve("w", {"requests": 1, "tokens": 1}).allowed
    assert not limiter.reserve("w", {"requests": 1, "tokens": 1}).allowed
    started = time.monotonic()
    waited = limiter.reserve("w", {"requests": 1, "tokens": 1}, wait=True, timeout=5)
    assert waited.allowed and 0.1 < time.monotonic() - started < 5
    short = limiter.reserve("w", {"requests": 2, "tokens": 1}, wait=True, timeout=0.01)
    assert not short.allowed
    never = limiter.reserve("w", {"requests": 3, "tokens": 1}, wait=True)
    assert not never.allowed and never.decision.retry_after is None, "a cost past a limit never waits"


def test_a_celery_task_settles_its_meters_to_its_result():
    celery = pytest.importorskip("celery")
    from ratekeeper.celery import RateLimitedTask

    app = celery.Celery("meters", broker="memory://")
    limiter = Limiter(METERS)

    @app.task(base=RateLimitedTask, limiter=limiter, limit_key=lambda prompt: "llm",
              limit_cost={"requests": 1, "tokens": 80},
              limit_settle=lambda reply: {"tokens": reply["usage"]["total_tokens"]})
    def complete(prompt):
        return {"usage": {"total_tokens": len(prompt)}}

    assert complete("twelve chars") == {"usage": {"total_tokens": 12}}
    scoped = limiter.with_rules(limiter.meters, scope="celery:" + complete.name.replace(" ", "_"))
    assert left(scoped, "llm", now=None) == (2, 88)
    assert left(limiter, "llm", now=None) == (3, 100), "the task's quota is kept under its scope"


METERED_SHELL = """
rk() { python3 -m ratekeeper "$@" --store "$STORE" --prefix "$PREFIX"; }
m='--meter requests=3/minute --meter tokens=100/minute'
rk check llm $m --cost requests=1 --cost tokens=60; echo "first exit $?"
rk check llm $m --cost requests=1 --cost tokens=60; echo "second exit $?"
rk check llm $m --cost tokens=40 --json | python3 -c 'import json,sys; print("tokens", json.load(sys.stdin)["meter"])'
rk wait llm $m --cost requests=1 --cost tokens=1 --timeout 0.2; echo "wait exit $?"
rk check llm $m --cost 5; echo "plain cost exit $?"
rk check llm --rules 1/s $m; echo "both exit $?"
rk check llm $m --cost tokens; echo "no units exit $?"
"""


def test_the_shell_checks_meters(redis_url):
    import os
    import subprocess

    out = subprocess.run(["bash", "-c", METERED_SHELL], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "STORE": redis_url, "PREFIX": unique_prefix()})
    lines = [line for line in out.stdout.splitlines() if "exit" in line or line.startswith("tokens")]
    assert lines == ["first exit 0", "second exit 1", "tokens tokens", "wait exit 1", "plain cost exit 2",
                     "both exit 2", "no units exit 2"], out.stdout + out.stderr
    assert "not '5'" in out.stderr and "--rules or --meter" in out.stderr and "not 'tokens'" in out.stderr


def test_the_pages_first_examples_run_as_they_are(redis_url):
    """docs/metered-apis.md's meters example and its reservation example,
    run as they are (on the test Redis, with a stand-in for the LLM client)."""
    import re
    from pathlib import Path
    from types import SimpleNamespace

    import ratekeeper
    from conftest import ROOT

    page = (Path(ROOT) / "docs" / "metered-apis.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    prefix = unique_prefix()
    reply = SimpleNamespace(usage=SimpleNamespace(total_tokens=321))
    client = SimpleNamespace(complete=lambda prompt, max_tokens: reply)
    names = {"ratekeeper": ratekeeper, "client": client, "prompt": "hello"}
    meters = blocks[0].replace('"redis://127.0.0.1:6379/0",', f'"{redis_url}", prefix="{prefix}",')
    exec(compile(meters, "metered-apis.md", "exec"), names)
    assert names["decision"].allowed and names["decision"].meter == "tokens"
    exec(compile(blocks[1], "metered-apis.md", "exec"), names)
    assert names["r"].refunded == {"tokens": 2000 - 321} and names["r"].over == {"tokens": 0}
    left = names["llm"].peek("openai", {"tokens": 1}).meters["tokens"][0].remaining
    assert left == 90000 - 1500 - 321
