"""Awaitable checks: each async API on every store, exactness under 500
concurrent checks (one loop, and two processes), cancellation, a frozen
Redis under uvicorn, and FastAPI, Starlette and Django ASGI apps over real
HTTP. (TLS: test_tls.py; the shared scenarios: test_scenarios.py.)"""

import asyncio
import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Tuple

import pytest
import redis

import ratekeeper
from ratekeeper import Limiter
import documentation
from conftest import ROOT, free_port, unique_prefix, wait_for_http

SERVERS = os.path.join(ROOT, "tests", "python", "servers")
EXAMPLES = os.path.join(ROOT, "examples")
T = 1_700_000_000.0


def test_every_async_api(store, prefix):
    async def main() -> None:
        limiter = Limiter("2/minute", store, prefix=prefix, on_error="raise")
        assert [(await limiter.acheck("k", now=T)).allowed for _ in range(3)] == [True, True, False]
        assert not (await limiter.apeek("k", now=T + 1)).allowed
        await limiter.areset("k")
        assert (await limiter.acheck("k", now=T + 2)).allowed
        many = await limiter.acheck_many(["x", "y", "x", "x"], now=T)
        assert [d.allowed for d in many] == [True, True, True, False]
        other = limiter.with_rules("1/minute", scope="other")
        both = await ratekeeper.acheck_all([(limiter, "z"), (other, "z"), (other, "z", 1, None)], now=T)
        assert [d.allowed for d in both] == [True, True, False]
        limiter.admin().block("203.0.113.9", ttl=60)
        listed = await limiter.ascreen("203.0.113.9")
        assert listed is not None and listed.outcome == "blocked"
        assert await limiter.ascreen("203.0.113.10") is None
        ban = ratekeeper.Fail2Ban("logins", maxretry=2, findtime=60, bantime=60)
        assert [await limiter.apenalize("email=a@b.c", ban=ban, now=T) for _ in range(2)] == [False, True]
        assert (await limiter.acheck("email=a@b.c", now=T + 1)).outcome == "blocked"

    asyncio.run(main())


def test_async_admin(store, prefix):
    """What an async admin page calls, off its event loop."""

    async def main() -> None:
        limiter = Limiter("5/minute", store, prefix=prefix)
        admin = limiter.admin()
        entry = await admin.ablock("user:1", ttl=60, reason="abuse")
        assert entry["kind"] == "blocklist" and entry["target"] == "user:1"
        await admin.asafelist("10.0.0.0/24", ttl=60)
        assert {e["target"] for e in await admin.aentries()} == {"user:1", "10.0.0.0/24"}
        assert (await admin.ainspect("user:1"))["blocklist"]["reason"] == "abuse"
        assert (await limiter.acheck("user:1")).outcome == "blocked"
        assert await admin.aunblock("user:1") is True
        assert await admin.aunsafelist("10.0.0.0/24") is True
        assert await admin.aentries() == []
        assert (await limiter.acheck("user:1")).outcome == "admitted"

    asyncio.run(main())


FORKED = """
import asyncio, os, sys
import ratekeeper

limiter = ratekeeper.Limiter("100/minute", sys.argv[1], prefix=sys.argv[2], on_error="raise")

async def check():
    return await asyncio.wait_for(limiter.acheck("k"), 5)

print("parent", asyncio.run(check()).allowed, flush=True)  # runtime, connection, loop link made
pid = os.fork()
if pid == 0:
    decision = asyncio.run(check())
    print("child", decision.allowed, decision.remaining, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent again", asyncio.run(check()).remaining, flush=True)
"""


def test_awaitables_work_in_a_forked_child(redis_url, prefix):
    """A child forked after the parent awaited checks makes its own runtime
    and connection (the parent's do not survive a fork)."""
    out = subprocess.run([sys.executable, "-c", FORKED, redis_url, prefix], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["parent True", "child True 98", "parent again 97"], out.stdout


def test_errors_reach_the_awaiting_coroutine(redis_url):
    async def main() -> None:
        down = Limiter("1/s", "redis://127.0.0.1:1/0", on_error="raise")
        with pytest.raises(ratekeeper.StorageError, match="127.0.0.1:1"):
            await down.acheck("k")
        fail_open = Limiter("1/s", "redis://127.0.0.1:1/0")
        d = await fail_open.acheck("k")
        assert d.allowed and d.outcome == "degraded"
        with pytest.raises(ratekeeper.ConfigurationError, match="cost"):
            await Limiter("1/s", redis_url).acheck("k", 0)
        with pytest.raises(TypeError):
            await Limiter("1/s", redis_url).acheck(42)

    asyncio.run(main())


def awaited_calls(store: str, prefix: str):
    """Every kind of awaited call, each a fresh coroutine: a limiter's,
    check_all's, an admin's and a gate's."""
    limiter = Limiter("50/minute", store, prefix=prefix, on_error="raise")
    admin = ratekeeper.Admin(store, prefix=prefix)
    gate = ratekeeper.Gate({"throttle": [{"scope": "all", "rules": "50/minute", "key": "ip"}]}, limiter=limiter)
    return [
        lambda: limiter.acheck("k"),
        lambda: limiter.apeek("k"),
        lambda: limiter.acheck_many(["a", "b"]),
        lambda: limiter.aacquire("w", timeout=1),
        lambda: limiter.areset("gone"),
        lambda: ratekeeper.acheck_all([(limiter, "x", 1, None)]),
        lambda: admin.ainspect("k"),
        lambda: gate.adecide("GET", "/", "example.com", "192.0.2.1", []),
    ]


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_awaited_calls_are_coroutines(kind, redis_url, prefix):
    """What users of redis.asyncio and limits.aio do every day: asyncio.run,
    create_task, TaskGroup, wait_for and cancellation take every a* call."""
    calls = awaited_calls("memory://" if kind == "memory" else redis_url, prefix)
    for call in calls:
        made = call()
        assert asyncio.iscoroutine(made), made
        made.close()  # never started: nothing runs, nothing warns
        asyncio.run(call())
    with pytest.warns(RuntimeWarning, match="coroutine 'acheck' was never awaited"):
        forgotten = calls[0]()  # a forgotten await says so, as an async def's does
        del forgotten
        gc.collect()
    try:
        asyncio.run(asyncio.wait_for(calls[0](), 0))  # thrown into before its first step ends
    except asyncio.TimeoutError:
        pass
    with pytest.raises(RuntimeError, match="already awaited"):
        done = calls[0]()
        asyncio.run(done)
        asyncio.run(done)

    async def main() -> None:
        for call in calls:
            await asyncio.create_task(call())
            await asyncio.wait_for(call(), 5)
            if hasattr(asyncio, "TaskGroup"):
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(call()) for _ in range(3)]
                assert all(t.done() and not t.cancelled() for t in tasks)
        # cancelled while it waits: the task ends cancelled, the call still logs once
        limiter = Limiter("5/minute", "memory://" if kind == "memory" else redis_url,
                          prefix=prefix + "cancel", on_error="raise")
        task = asyncio.create_task(limiter.acheck("c"))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        for _ in range(100):
            if (await limiter.apeek("c")).remaining == 4:
                break
            await asyncio.sleep(0.01)
        assert (await limiter.apeek("c")).remaining == 4

    asyncio.run(main())


# (alone: 500 checks queued at once on one connection each wait within the
# default 250 ms timeout, and beside the other tests' servers on two cores
# one on the Cluster once did not)
@pytest.mark.alone
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_500_concurrent_checks_admit_exactly_the_limit(store, prefix, loop):
    async def main() -> int:
        limiter = Limiter("100/minute", store, prefix=prefix, on_error="raise")
        decisions = await asyncio.gather(*(limiter.acheck("hot") for _ in range(500)))
        assert not any(d.degraded for d in decisions)
        return sum(d.allowed for d in decisions)

    if loop == "uvloop":
        import uvloop

        event_loop = uvloop.new_event_loop()
        try:
            assert event_loop.run_until_complete(main()) == 100
        finally:
            event_loop.close()
        return
    assert asyncio.run(main()) == 100


# (alone, as the two around it: on the Cluster one of its checks once
# waited past the default 250 ms timeout beside the other tests)
@pytest.mark.alone
def test_event_loops_in_eight_threads_each_settle_their_own_checks(store, prefix):
    """Each loop holds the checks of its turn and hands them over at its next
    (one outbox per loop): eight loops in eight threads, released at once,
    share one limiter; every check settles on the loop that made it, and
    exactly the limit is admitted."""
    limiter = Limiter("300/minute", store, prefix=prefix, on_error="raise")
    start = threading.Barrier(8)

    def one_loop(_: int) -> list:
        async def main() -> list:
            start.wait(timeout=30)
            loop = asyncio.get_running_loop()
            decisions = await asyncio.wait_for(
                asyncio.gather(*(limiter.acheck("shared") for _ in range(100))), timeout=60)
            assert asyncio.get_running_loop() is loop
            return decisions

        return asyncio.run(main())

    with ThreadPoolExecutor(8) as pool:
        outcomes = [d for ds in pool.map(one_loop, range(8)) for d in ds]
    assert len(outcomes) == 800 and not any(d.degraded for d in outcomes)
    assert sum(d.allowed for d in outcomes) == 300


CHILD = """
import asyncio, sys
import ratekeeper

async def main():
    limiter = ratekeeper.Limiter("100/minute", sys.argv[1], prefix=sys.argv[2], on_error="raise")
    decisions = await asyncio.gather(*(limiter.acheck("hot") for _ in range(250)))
    print(sum(d.allowed for d in decisions))

asyncio.run(main())
"""


# (alone, as the test above: a cold process's 500 queued checks each wait
# within the default 250 ms timeout, and one once did not)
@pytest.mark.alone
def test_two_processes_of_concurrent_checks_admit_exactly_the_limit(redis_url, prefix):
    children = [subprocess.Popen([sys.executable, "-c", CHILD, redis_url, prefix], stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    admitted = [int(child.communicate(timeout=60)[0]) for child in children]
    assert sum(admitted) == 100, admitted


def scripts_run(client: redis.Redis) -> int:
    """How many check scripts this Redis has run (EVALSHA and EVAL)."""
    stats = client.info("commandstats")
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


def test_cancelled_checks_log_once_or_not_at_all(own_redis, prefix):
    """Every script that ran logged one unit; no cancelled check ran twice
    or left its connection unusable. (A Redis of its own: it counts every
    script the server runs.)"""
    redis_url = f"redis://127.0.0.1:{own_redis[0]}/0"
    client = redis.Redis.from_url(redis_url)
    limiter = Limiter("10000/minute", redis_url, prefix=prefix, on_error="raise", denial_cache=0)

    async def main() -> int:
        await limiter.acheck("warm")  # the policy view and the connection, made
        before = scripts_run(client)
        tasks = [asyncio.ensure_future(limiter.acheck("k")) for _ in range(300)]
        await asyncio.sleep(0)
        for task in tasks[::2]:
            task.cancel()
        timed_out = 0
        for i in range(100):
            # half given up at once, half after 0.1 ms: on an idle machine a
            # check can be answered within that, so some time out for sure
            try:
                await asyncio.wait_for(limiter.acheck("k"), timeout=0.0001 if i % 2 else 0)
            except asyncio.TimeoutError:
                timed_out += 1
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        cancelled = sum(isinstance(o, asyncio.CancelledError) for o in outcomes)
        assert cancelled > 0 and timed_out > 0, (cancelled, timed_out)
        # the cancelled checks finish on the runtime (on a busy machine,
        # late): until the count of scripts run stops moving
        ran = scripts_run(client) - before
        for _ in range(50):
            await asyncio.sleep(0.2)
            now, ran = ran, scripts_run(client) - before
            if now == ran:
                break
        used = 10000 - (await limiter.apeek("k")).remaining
        assert used == ran, f"{ran} scripts ran but {used} units are logged"
        after = await limiter.acheck("k")  # the shared connection still serves
        assert after.allowed and not after.degraded
        return used

    used = asyncio.run(main())
    assert 150 <= used <= 400


def get(url: str):
    """(status, headers (any case), body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def serve(app: str, env: dict, tmp_path, app_dir: str, stack: Tuple[str, str] = ("auto", "auto")):
    """A uvicorn server (one worker) for `app` on `stack` (its event loop and
    HTTP parser: uvicorn's "auto" picks uvloop and httptools when installed),
    and its base URL."""
    port = free_port()
    log = open(tmp_path / f"uvicorn-{port}.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--app-dir", app_dir, "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--loop", stack[0], "--http", stack[1]],
        env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/health", process=server)
    return server, base, log


@pytest.fixture
def uvicorn(tmp_path):
    """Starts uvicorn servers; stops them all afterwards."""
    started = []

    def start(app: str, env: dict, app_dir: str = EXAMPLES, stack: Tuple[str, str] = ("auto", "auto")) -> str:
        server, base, log = serve(app, env, tmp_path, app_dir, stack)
        started.append((server, log))
        return base

    yield start
    for server, log in started:
        server.terminate()
        server.wait(timeout=20)
        log.close()


@pytest.mark.parametrize("stack", [("asyncio", "h11"), ("uvloop", "httptools")], ids=["asyncio-h11", "uvloop-httptools"])
def test_fastapi_over_http(uvicorn, redis_url, stack):
    """On uvicorn's pure-Python loop and parser, and on uvloop and httptools
    (`pip install "fastapi[standard]"`)."""
    prefix = unique_prefix()
    base = uvicorn("fastapi_app:app", {"RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": prefix}, stack=stack)
    first = get(f"{base}/search?q=a")
    assert first[0] == 200 and json.loads(first[2]) == {"q": "a"}
    assert first[1]["X-RateLimit-Limit"] == "2", "the route's own rule binds"
    second = get(f"{base}/search?q=b")
    denied = get(f"{base}/search?q=c")
    assert second[0] == 200 and denied[0] == 429
    assert json.loads(denied[2]) == {"error": "rate_limited", "retry_after": 1}
    assert denied[1]["Retry-After"] == "1" and denied[1]["content-type"] == "application/json"
    assert get(f"{base}/")[0] == 200, "other routes keep their quota"
    statuses = [get(f"{base}/")[0] for _ in range(12)]
    assert 429 in statuses, "the middleware limits every route (10/second)"
    assert all(get(f"{base}/health")[0] == 200 for _ in range(15)), "exempt"
    ratekeeper.Admin(redis_url, prefix=prefix).block("127.0.0.1", ttl=60)
    deadline = time.monotonic() + 5
    while get(f"{base}/health")[0] == 200 and get(f"{base}/")[0] != 403 and time.monotonic() < deadline:
        time.sleep(0.2)
    blocked = get(f"{base}/")
    assert blocked[0] == 403 and blocked[2] == b'{"error":"blocked"}'


def test_starlette_over_http(uvicorn, redis_url):
    base = uvicorn("starlette_app:app", {"RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": unique_prefix()})
    answers = [get(f"{base}/") for _ in range(11)]
    assert [a[0] for a in answers] == [200] * 10 + [429]
    assert answers[0][1]["X-RateLimit-Remaining"] == "9"
    assert json.loads(answers[-1][2]) == {"error": "rate_limited", "retry_after": 1}


def test_django_asgi_over_http(uvicorn, redis_url):
    base = uvicorn("demo.asgi:application", {"RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": unique_prefix()},
                   app_dir=os.path.join(EXAMPLES, "django_project"))
    answers = [get(f"{base}/") for _ in range(6)]
    assert [a[0] for a in answers] == [200] * 5 + [429]
    assert answers[0][1]["X-RateLimit-Limit"] == "5"
    time.sleep(1.1)  # RULES (5/second) limit /report too
    report = [get(f"{base}/report")[0] for _ in range(3)]
    assert report == [200, 200, 429], "@ratelimit on an async view"


def test_a_websocket_handshake_is_limited(uvicorn, redis_url):
    """Handshakes count as requests; a refused one is closed before it is
    accepted, which uvicorn answers with 403."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    base = uvicorn("starlette_app:app", {"RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": unique_prefix()})
    url = base.replace("http://", "ws://") + "/echo"
    for i in range(10):
        with connect(url) as socket:
            socket.send(f"hello {i}")
            assert socket.recv() == f"hello {i}"
    with pytest.raises(InvalidStatus) as refused:
        connect(url)
    assert refused.value.response.status_code == 403


# (alone, as test_event_loop's: it times the loop's longest stall and the
# other requests' answers, which other tests' servers and browsers beside it
# lengthen; beside them in CPython 3.10's matrix cell the loop once stalled
# 83 ms, and 1 to 5 ms alone here, with or without two busy cores)
@pytest.mark.alone
def test_a_frozen_redis_never_stalls_fastapis_event_loop(own_redis, uvicorn):
    port, pid = own_redis
    base = uvicorn("stall_fastapi:app", {"RATEKEEPER_STORE": f"redis://127.0.0.1:{port}/0",
                                         "RATEKEEPER_PREFIX": unique_prefix(),
                                         "PYTHONPATH": os.pathsep.join([SERVERS, EXAMPLES])}, app_dir=SERVERS)
    assert get(f"{base}/")[0] == 200
    get(f"{base}/_stall")  # a new measure
    os.kill(pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(8) as pool:
            started = time.monotonic()
            frozen = [pool.submit(get, f"{base}/") for _ in range(8)]
            health = []
            while time.monotonic() - started < 1.0:
                t0 = time.monotonic()
                assert get(f"{base}/health")[0] == 200
                health.append(time.monotonic() - t0)
            answers = [f.result() for f in frozen]
            waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    longest = json.loads(get(f"{base}/_stall")[2])["longest"]
    print(f"Redis frozen: longest loop stall {longest * 1000:.1f} ms, slowest /health {max(health) * 1000:.1f} ms")
    assert all(status == 200 for status, _, _ in answers), "fail open: on_error='allow'"
    assert not any("X-RateLimit-Remaining" in h for _, h, _ in answers), "degraded: no quota claimed"
    assert waited < 2.0
    # (a check that held the loop would hold it its whole timeout, 250 ms:
    # the bounds are half that and less, above what this 2-core machine's
    # own scheduling shows a loop that waits on nothing, up to 83 ms)
    assert max(health) < 0.2, "other requests on the loop kept being served"
    assert longest < 0.125, f"the event loop stalled for {longest * 1000:.0f} ms (timeout 250 ms)"


def test_the_readmes_async_examples_are_the_files_run_here():
    readme = documentation.text()
    for name in ("fastapi_app.py", "starlette_app.py"):
        code = Path(EXAMPLES, name).read_text()
        body = code.split('"""', 2)[2].strip()  # without the module docstring
        blocks = [b.strip() for b in re.findall(r"```python\n(.*?)```", readme, re.S)]
        assert body in blocks, f"README's async section should show examples/{name} as it is"
