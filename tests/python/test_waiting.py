"""Waiting for a slot: acquire from many threads in two processes against
one Redis, its timeouts, the @limited decorator, and the shell commands
`ratekeeper check` and `ratekeeper wait` from a bash script."""

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

import ratekeeper
from ratekeeper import Limiter, RateLimitExceeded
import documentation
from conftest import ROOT

CALLERS = """
import json, sys, threading
import ratekeeper

limiter = ratekeeper.Limiter("5/second", sys.argv[1], prefix=sys.argv[2])
times = []

def caller():
    times.append(limiter.acquire("shared", timeout=10).now)

threads = [threading.Thread(target=caller) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(times))
"""


def test_acquire_from_8_threads_in_2_processes(redis_url, prefix):
    """16 callers on one key at 5/second: every one gets through, never more
    than 5 in any second by the Redis clock, close to the ideal 3 s (5 at
    once, then 5 more as each second frees them, and the last one)."""
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, "-c", CALLERS, redis_url, prefix], stdout=subprocess.PIPE,
                                 text=True) for _ in range(2)]
    times = sorted(t for child in children for t in json.loads(child.communicate(timeout=60)[0]))
    elapsed = time.monotonic() - started
    assert len(times) == 16, "every caller got through"
    for i in range(len(times) - 5):
        assert times[i + 5] - times[i] >= 1.0 - 1e-9, f"6 admissions within a second: {times[i:i + 6]}"
    spread = times[-1] - times[0]
    ideal = 3.0
    print(f"16 callers at 5/second: last admitted {spread:.3f} s after the first (ideal {ideal:.1f} s, "
          f"ratio {spread / ideal:.3f}); {elapsed:.2f} s in all")
    assert ideal <= spread < ideal * 1.1


def test_a_wait_past_the_timeout_raises_with_the_decision(redis_url, prefix):
    limiter = Limiter("1/minute", redis_url, prefix=prefix)
    assert limiter.acquire("k").allowed
    started = time.monotonic()
    with pytest.raises(RateLimitExceeded) as refused:
        limiter.acquire("k", timeout=0.5)
    assert time.monotonic() - started < 0.2, "the next slot is a minute away: no point waiting 0.5 s"
    assert not refused.value.decision.allowed and refused.value.decision.retry_after > 50
    with pytest.raises(RateLimitExceeded, match="never"):
        limiter.acquire("k", cost=2)
    with pytest.raises(ratekeeper.ConfigurationError, match="timeout"):
        limiter.acquire("k", timeout=-1)


def test_acquire_sleeps_the_exact_wait(redis_url, prefix):
    limiter = Limiter("2/300ms", redis_url, prefix=prefix)
    started = time.monotonic()
    decisions = [limiter.acquire("k") for _ in range(5)]
    took = time.monotonic() - started
    assert all(d.allowed for d in decisions)
    assert 0.6 <= took < 0.75, took  # two waits of 300 ms, plus at most a jitter each


def test_aacquire_waits_on_the_event_loop(redis_url, prefix):
    limiter = Limiter("2/300ms", redis_url, prefix=prefix)

    async def main() -> float:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        started = time.monotonic()
        decisions = [await limiter.aacquire("k") for _ in range(5)]
        took = time.monotonic() - started
        ticker.cancel()
        assert all(d.allowed for d in decisions)
        assert ticks > 30, "the loop went on while the checks waited"
        await limiter.acheck("full", 2)
        with pytest.raises(RateLimitExceeded):
            await limiter.aacquire("full", timeout=0.01)
        return took

    assert 0.6 <= asyncio.run(main()) < 0.75


def test_limited_functions(redis_url, prefix):
    limiter = Limiter("2/minute", redis_url, prefix=prefix)
    calls = []

    @limiter.limited(lambda user, **kw: f"user:{user}", wait=False)
    def fetch(user: int, page: int = 1) -> int:
        calls.append((user, page))
        return page

    assert fetch(1) == 1 and fetch(1, page=2) == 2
    with pytest.raises(RateLimitExceeded) as refused:
        fetch(1, page=3)
    assert refused.value.decision.retry_after > 0 and calls == [(1, 1), (1, 2)]
    assert fetch(2) == 1, "another key"

    quick = Limiter("2/300ms", redis_url, prefix=prefix + "-quick")

    @quick.limited("partner")
    async def call_partner(n: int) -> int:
        return n

    async def main() -> list:
        return [await call_partner(n) for n in range(4)]

    started = time.monotonic()
    assert asyncio.run(main()) == [0, 1, 2, 3]
    assert time.monotonic() - started >= 0.3, "the third call waited for its slot"


SCRIPT = r"""
set -u
rk() { python3 -m ratekeeper "$@" --store "$STORE" --prefix "$PREFIX"; }
rk check report --rules "2/minute" && echo "first admitted"
rk check report --rules "2/minute" --json | python3 -c 'import json,sys; print("second", json.load(sys.stdin)["outcome"])'
rk check report --rules "2/minute"; echo "third exit $?"
start=$(date +%s.%N)
rk wait partner --rules "1/second" >/dev/null && rk wait partner --rules "1/second" >/dev/null && \
  python3 -c "import sys; print('waited', float(sys.argv[2]) - float(sys.argv[1]) >= 0.9)" "$start" "$(date +%s.%N)"
rk wait report --rules "2/minute" --timeout 0.5; echo "timeout exit $?"
python3 -m ratekeeper check report --rules "2/minute" --store memory://; echo "memory exit $?"
rk check report --rules "2/fortnight"; echo "bad rules exit $?"
"""


def test_the_shell_commands_from_a_bash_script(redis_url, prefix):
    out = subprocess.run(["bash", "-c", SCRIPT], env={**os.environ, "STORE": redis_url, "PREFIX": prefix},
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("admitted: 1 left of 2"), out.stdout
    assert lines[1:3] == ["first admitted", "second admitted"], out.stdout
    assert lines[3].startswith("denied: retry in") and lines[4] == "third exit 1", out.stdout
    assert "waited True" in lines, out.stdout
    assert "timeout exit 1" in lines and "memory exit 2" in lines and "bad rules exit 2" in lines, out.stdout
    assert "memory://" in out.stderr and "fortnight" in out.stderr


def test_the_readmes_scripts_example_runs(redis_url, prefix):
    """README's `@partner.limited` example, run as it is (on the test Redis)."""
    import re

    readme = documentation.text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if b.startswith("partner = ratekeeper"))
    code = block.replace("redis://127.0.0.1:6379/0", redis_url).replace('scope="partner-api"',
                                                                          f'scope="partner-api", prefix="{prefix}"')
    names = {"ratekeeper": ratekeeper}
    exec(compile(code, "README.md", "exec"), names)
    assert names["fetch"](1) is None
    assert asyncio.run(names["sync_account"]("acme")) is None
    assert names["partner"].peek("partner-api").remaining == 9


WAITER = """
import sys
import ratekeeper

limiter = ratekeeper.Limiter("1/minute", sys.argv[1], prefix=sys.argv[2])
limiter.check("k")
print("waiting", flush=True)
limiter.acquire("k")  # a minute away, no timeout
"""


def test_ctrl_c_ends_a_wait(redis_url, prefix):
    import signal

    waiter = subprocess.Popen([sys.executable, "-c", WAITER, redis_url, prefix], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert waiter.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    sent = time.monotonic()
    waiter.send_signal(signal.SIGINT)
    _, err = waiter.communicate(timeout=10)
    assert time.monotonic() - sent < 1.0, "the wait heard Ctrl-C at once"
    assert "KeyboardInterrupt" in err
