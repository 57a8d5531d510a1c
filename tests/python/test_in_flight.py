"""In-flight rules from Python ("3 concurrent" beside rates): holds that take
a lease on every store, released by `with`, by `release()` or by lapsing;
waits that take the slot a release frees; the awaited forms; the calls a
limiter with such a rule refuses; and, on one Redis, processes of both
languages calling a slow upstream on loopback through one key, one of them
killed with SIGKILL while it holds slots."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis

import ratekeeper
from conftest import ROOT, configured, unique_prefix


def limiter(rules, store, **options):
    return ratekeeper.Limiter(rules, store, scope=unique_prefix(), on_error="raise", **options)


def test_slots_are_held_released_and_refused_on_every_store(store):
    export = limiter("2 concurrent; 100/minute", store)
    with export.hold("user:1") as first:
        assert first.allowed and first.id and first.released is False
        assert first.lapse_at - first.taken_at == pytest.approx(60.0, abs=0.01)
        second = export.hold("user:1")
        assert second.decision.in_flight == 2 and second.decision.remaining == 0
        third = export.hold("user:1")
        assert not third.allowed and third.id is None
        assert third.decision.retry_after == pytest.approx(60.0, abs=1.0)
        with pytest.raises(ratekeeper.RateLimitExceeded) as refused:
            with export.hold("user:1"):
                pass
        assert "every slot is held" in str(refused.value)
        assert refused.value.decision.in_flight == 2
        assert sorted(lease for lease, _ in export.leases("user:1")) == sorted([first.id, second.id])
        peeked = export.peek("user:1")
        assert not peeked.allowed and peeked.in_flight == 2
        assert export.hold("user:2").allowed  # another key
        assert second.release() is True
        assert second.release() is False  # twice: harmless
        assert second.extend() is None  # released: nothing to extend
    # the with block released the first
    assert export.peek("user:1").in_flight == 0
    assert first.released is True


@pytest.mark.parametrize("server", ["script", "module"])
def test_a_hold_and_its_release_are_one_call_each(server, own_redis):
    """One EVALSHA each on a Redis without the module; with it, one
    RATEKEEPER.HOLD and one RATEKEEPER.LEASES, and no script."""
    url = f"redis://127.0.0.1:{own_redis[0]}/0" if server == "script" else configured("RATEKEEPER_TEST_REDIS_MODULE")
    con = redis.Redis.from_url(url)
    export = limiter("2 concurrent; 100/minute", url)
    export.hold("warm").release()

    def calls():
        stats = con.info("commandstats")
        return {k[len("cmdstat_"):]: v["calls"] for k, v in stats.items()
                if k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_ratekeeper.hold", "cmdstat_ratekeeper.leases")}

    before = calls()
    lease = export.hold("k")
    held = calls()
    assert lease.release()
    released = calls()
    asked = ("evalsha", "evalsha") if server == "script" else ("ratekeeper.hold", "ratekeeper.leases")
    grew = lambda a, b: {k: b.get(k, 0) - a.get(k, 0) for k in b if b.get(k, 0) != a.get(k, 0)}  # noqa: E731
    assert grew(before, held) == {asked[0]: 1}
    assert grew(held, released) == {asked[1]: 1}
    assert export.peek("k").in_flight == 0


def test_a_lease_lapses_and_extends(redis_url):
    short = limiter("1 in flight", redis_url)
    lease = short.hold("job", lease=0.3)
    assert lease.lapse_at - lease.taken_at == pytest.approx(0.3, abs=0.01)
    assert not short.hold("job").allowed
    lapse_at = lease.extend(5)
    assert lapse_at == pytest.approx(time.time() + 5, abs=1.0)
    time.sleep(0.5)
    assert not short.hold("job").allowed, "extended past its first lapse"
    assert lease.release() is True
    gone = short.hold("job", lease=0.2)
    time.sleep(0.35)
    # its holder never released it: the slot came back when it lapsed
    retaken = short.hold("job")
    assert retaken.allowed
    assert gone.release() is False and gone.extend() is None
    retaken.release()


def test_calls_that_would_keep_a_slot_are_refused():
    export = limiter("2 concurrent; 10/minute", "memory://")
    for call in (lambda: export.check("k"), lambda: export.reserve("k"), lambda: export.acquire("k"),
                 lambda: export.check_many(["k"])):
        with pytest.raises(ratekeeper.ConfigurationError, match="hold"):
            call()
    with pytest.raises(ratekeeper.ConfigurationError, match="has none"):
        limiter("10/minute", "memory://").hold("k")
    for lease in (0, -1, float("nan"), 86_401):
        with pytest.raises(ratekeeper.ConfigurationError, match="lease"):
            export.hold("k", lease=lease)
    for rules, why in (("2 concurrent; 3 at once", "2 in-flight rules"), ("0 concurrent", "at least 1")):
        with pytest.raises(ratekeeper.ConfigurationError, match=why):
            ratekeeper.Limiter(rules)
    with pytest.raises(ratekeeper.ConfigurationError, match="no tiers"):
        ratekeeper.Limiter("2 concurrent", tiers={"pro": "10/s"})
    with pytest.raises(ratekeeper.ConfigurationError, match="meter 'calls'"):
        ratekeeper.Limiter({"calls": "2 concurrent", "tokens": "100/minute"})


def test_a_limited_function_holds_a_slot_for_its_run(redis_url):
    one = limiter("1 concurrent", redis_url)
    inside = []

    @one.limited("partner")
    def call():
        inside.append(one.peek("partner").in_flight)
        return "done"

    @one.limited("partner", wait=False)
    async def call_async():
        inside.append((await one.apeek("partner")).in_flight)
        raise KeyError("boom")

    assert call() == "done"
    with pytest.raises(KeyError):
        asyncio.run(call_async())
    assert inside == [1, 1] and one.peek("partner").in_flight == 0, "held while running, released after"
    with one.hold("partner"):
        with pytest.raises(ratekeeper.RateLimitExceeded):
            one.limited("partner", wait=False)(lambda: None)()
        with pytest.raises(ratekeeper.RateLimitExceeded):
            one.limited("partner", timeout=0.2)(lambda: None)()


def test_a_waiting_hold_takes_the_slot_a_release_frees(store):
    one = limiter("1 concurrent", store)
    held = one.hold("w", lease=60)
    threading.Timer(0.2, held.release).start()
    started = time.monotonic()
    with one.hold("w", wait=True, timeout=5) as lease:
        took = time.monotonic() - started
        assert lease.allowed
    assert 0.15 < took < 1.5, took  # the release was heard, not the 60 s lease
    one.hold("w")  # held now, never released here
    started = time.monotonic()
    with pytest.raises(ratekeeper.RateLimitExceeded):
        with one.hold("w", wait=True, timeout=0.3):
            pass
    assert time.monotonic() - started < 1.5


def test_the_awaited_forms(store):
    async def main():
        two = limiter("2 concurrent", store)
        async with two.ahold("a") as lease:
            assert lease.allowed
            other = await two.ahold("a")
            assert other.decision.in_flight == 2
            assert (await two.apeek("a")).allowed is False
            assert await other.aextend(5) == pytest.approx(time.time() + 5, abs=1.0)
            assert await other.arelease() is True
        assert (await two.apeek("a")).in_flight == 0
        with pytest.raises(ratekeeper.RateLimitExceeded):
            held = [await two.ahold("b"), await two.ahold("b")]
            async with two.ahold("b"):
                pass
        for lease in held:
            await lease.arelease()
        # an exception in the block goes on, and the slot comes back
        with pytest.raises(KeyError):
            async with two.ahold("c"):
                raise KeyError("boom")
        assert (await two.apeek("c")).in_flight == 0
        waiter = asyncio.ensure_future(two.ahold("b", wait=True, timeout=5))
        assert (await waiter).allowed

    asyncio.run(main())


class SlowUpstream(BaseHTTPRequestHandler):
    """Answers after DELAY, recording the most calls it had in flight at
    once and each call's start and end."""

    DELAY = 0.05

    lock = threading.Lock()
    now = 0
    most = 0
    calls = []  # (start, end)

    def do_GET(self):
        with self.lock:
            SlowUpstream.now += 1
            SlowUpstream.most = max(SlowUpstream.most, SlowUpstream.now)
        start = time.monotonic()
        time.sleep(self.DELAY)
        with self.lock:
            SlowUpstream.now -= 1
            SlowUpstream.calls.append((start, time.monotonic()))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


PYTHON_CALLER = """
import sys, threading, time, urllib.request
import ratekeeper
url, store, scope, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
partner = ratekeeper.Limiter("3 concurrent; 6000/minute", store, scope=scope, on_error="raise")
left = [calls]
lock = threading.Lock()
def work():
    while True:
        with lock:
            if left[0] == 0:
                return
            left[0] -= 1
        with partner.hold("partner", wait=True, timeout=60):
            urllib.request.urlopen(url).read()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("done", flush=True)
"""

RUBY_CALLER = """
require "net/http"
require "ratekeeper"
url, store, scope, calls, prefix = ARGV
partner = Ratekeeper::Limiter.new("3 concurrent; 6000/minute", store: store, scope: scope, on_error: :raise,
                                  **(prefix ? { prefix: prefix } : {}))
queue = Queue.new
calls.to_i.times { queue << 1 }
queue.close
threads = 4.times.map do
  Thread.new do
    while queue.pop
      partner.hold("partner", wait: true, timeout: 60) { Net::HTTP.get(URI(url)) }
    end
  end
end
threads.each(&:join)
puts "done"
"""

HOLDER = """
import sys, time
import ratekeeper
store, scope = sys.argv[1], sys.argv[2]
partner = ratekeeper.Limiter("3 concurrent; 6000/minute", store, scope=scope, on_error="raise")
leases = [partner.hold("partner", lease=2) for _ in range(2)]
assert all(lease.allowed for lease in leases)
print("holding", flush=True)
time.sleep(600)
"""


def ruby_env():
    lib = os.path.join(ROOT, "ruby", "lib")
    return {**os.environ, "RUBYLIB": lib + os.pathsep + os.environ.get("RUBYLIB", "")}


def test_processes_of_both_languages_share_three_slots(redis_url):
    """Three Python processes and one Ruby process, four threads each, call a
    slow upstream (100 ms a call) through one key of "3 concurrent": it never
    sees more than 3 at once, and at least 2.5 on average while callers
    queue (slots are reused at once)."""
    SlowUpstream.now = SlowUpstream.most = 0
    SlowUpstream.calls = []

    class Slower(SlowUpstream):
        DELAY = 0.1

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slower)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/call"
    scope = unique_prefix()
    callers = [subprocess.Popen([sys.executable, "-c", PYTHON_CALLER, url, redis_url, scope, "40"],
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    callers.append(subprocess.Popen(["ruby", "-e", RUBY_CALLER, url, redis_url, scope, "40"],
                                    stdout=subprocess.PIPE, text=True, env=ruby_env()))
    try:
        outs = [caller.communicate(timeout=120)[0] for caller in callers]
    finally:
        for caller in callers:
            caller.kill()
        server.shutdown()
    assert all(out.strip() == "done" for out in outs), outs
    calls = sorted(SlowUpstream.calls)
    assert len(calls) == 160
    assert SlowUpstream.most == 3
    # while every caller has calls to make (from the 30th call's start to
    # the 130th's), slots are reused at once: the calls in flight, averaged
    # over that time
    since, until = calls[30][0], calls[130][0]
    busy = sum(max(0.0, min(end, until) - max(start, since)) for start, end in calls)
    average = busy / (until - since)
    print(f"in flight on average: {average:.2f}")
    assert average >= 2.5, average


def test_a_killed_holders_slots_come_back_within_its_lease(redis_url):
    scope = unique_prefix()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url, scope], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        killed_at = time.monotonic()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        holder.kill()
    partner = ratekeeper.Limiter("3 concurrent; 6000/minute", redis_url, scope=scope, on_error="raise")
    third = partner.hold("partner")
    assert third.allowed and third.decision.in_flight == 3  # the dead holder's two are still held
    assert not partner.hold("partner").allowed
    with partner.hold("partner", wait=True, timeout=5) as back:
        came_back = time.monotonic() - killed_at
        assert back.allowed
    assert came_back < 2 + 1, came_back  # the lease (2 s), plus 1 s
    third.release()


def test_a_prefork_celery_worker_holds_at_most_two_slots(own_redis, tmp_path):
    """Celery's default pool (prefork, 4 children) runs 40 tasks that call
    the slow upstream holding a slot of "2 concurrent": each runs once, none
    fails, and the upstream never sees more than 2 at once."""
    pytest.importorskip("celery")
    SlowUpstream.now = SlowUpstream.most = 0
    SlowUpstream.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowUpstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port, _ = own_redis
    servers = os.path.join(ROOT, "tests", "python", "servers")
    env = {**os.environ, "RK_BROKER": f"redis://127.0.0.1:{port}/1", "RK_STORE": f"redis://127.0.0.1:{port}/0",
           "RK_RULES": "2 concurrent; 6000/minute", "RK_PREFIX": unique_prefix(),
           "RK_UPSTREAM": f"http://127.0.0.1:{server.server_address[1]}/call",
           "PYTHONPATH": os.pathsep.join(filter(None, [servers, os.environ.get("PYTHONPATH")]))}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = open(tmp_path / "celery.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "in_flight_celery", "worker", "-P", "prefork",
                               "-c", "4", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, cwd=servers)
    saved = dict(os.environ)
    try:
        sys.path.insert(0, servers)
        os.environ.update({k: v for k, v in env.items() if k.startswith("RK_")})
        import in_flight_celery

        for n in range(40):
            in_flight_celery.upstream.delay(n)
        deadline = time.monotonic() + 60
        while len(SlowUpstream.calls) < 40 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        sys.path.remove(servers)
        os.environ.clear()
        os.environ.update(saved)
        server.shutdown()
    text = (tmp_path / "celery.log").read_text()
    assert len(SlowUpstream.calls) == 40, f"{len(SlowUpstream.calls)} of 40 ran: {text[-3000:]}"
    assert SlowUpstream.most == 2, SlowUpstream.most
    assert "raised unexpected" not in text and "Retry in" not in text, text[-3000:]


def ratekeeper_cli(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "ratekeeper", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_shell_runs_a_command_holding_a_slot(redis_url):
    scope = unique_prefix()
    common = ["export", "--rules", "1 concurrent", "--store", redis_url, "--scope", scope]
    ran = ratekeeper_cli("wait", *common, "--hold", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert ran.returncode == 3, ran.stderr  # the command's status
    # a command that outlives its lease (1 s) keeps its slot: the lease is extended while it runs
    # (the tool's prefix: $RATEKEEPER_PREFIX, which conftest sets)
    export = ratekeeper.Limiter("1 concurrent", redis_url, scope=scope, prefix=os.environ["RATEKEEPER_PREFIX"])
    slow = subprocess.Popen([sys.executable, "-m", "ratekeeper", "wait", *common, "--lease", "1", "--hold", "--",
                             sys.executable, "-c", "import time; time.sleep(4)"])
    try:
        deadline = time.monotonic() + 20
        while export.peek("export").in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # past the first lease's lapse
        busy = ratekeeper_cli("wait", *common, "--timeout", "0.2", "--hold", "--", "true")
        assert busy.returncode == 1 and "denied" in busy.stdout, busy
        assert slow.wait(timeout=30) == 0
    finally:
        slow.kill()
    free = ratekeeper_cli("wait", *common, "--timeout", "2", "--hold", "--", "true")
    assert free.returncode == 0, free.stderr  # released when the command ended
    missing = ratekeeper_cli("wait", *common, "--hold", "--", "/nonexistent/program")
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    for wrong in (["wait", *common, "--hold"], ["wait", *common, "--", "true"], ["check", *common]):
        refused = ratekeeper_cli(*wrong)
        assert refused.returncode == 2, (wrong, refused)
        assert "--hold" in refused.stderr or "hold()" in refused.stderr, refused.stderr


def test_the_pages_first_example_runs_as_written():
    import re
    from pathlib import Path

    page = (Path(ROOT) / "docs" / "in-flight.md").read_text()
    first = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    ran = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1", "0"], ran.stdout


def test_an_operator_sees_and_releases_a_lease_from_the_shell(redis_url):
    scope = unique_prefix()
    export = ratekeeper.Limiter("1 concurrent", redis_url, scope=scope, prefix=os.environ["RATEKEEPER_PREFIX"])
    stuck = export.hold("job:7")
    where = ["--scope", scope, "--store", redis_url]
    seen = ratekeeper_cli("inspect", "job:7", *where)
    assert seen.returncode == 0 and f"leases: {stuck.id} (since " in seen.stdout, seen
    released = ratekeeper_cli("release-lease", "job:7", stuck.id, *where, "--reason", "hung", "--actor", "ops")
    assert released.returncode == 0, released.stderr
    assert export.hold("job:7").allowed, "the slot is free again"
    again = ratekeeper_cli("release-lease", "job:7", stuck.id, *where)
    assert again.returncode == 3 and "holds no lease" in again.stderr, again
    history = ratekeeper_cli("history", "--limit", "1", "--json", "--store", redis_url)
    (change,) = json.loads(history.stdout)
    assert (change["action"], change["detail"], change["actor"], change["reason"]) == ("release", stuck.id, "ops", "hung")

