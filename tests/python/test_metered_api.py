"""A metered API on loopback, called through reservations by three processes
of four threads each (two Python, one Ruby) sharing one limiter of two meters
on Redis: each call asks for up to MAX_TOKENS and uses a random 10 % to 100 %
of it, and the mock records every call's reservation time (the Redis clock)
and the tokens it used. In every sliding window of the record, requests and
tokens stay within their limits (the tokens a call used never exceed its
estimate, so no overage is settled); the tokens used in the whole windows
from the first call on are at least 90 % of what an ideal meter would admit
in them (refunds really return quota).

The suite runs two windows of 5 s; RK_METERED_FULL=1 runs the issue's minute
(600 requests and 30,000 tokens a minute, for 60 s)."""

import json
import os
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from conftest import ROOT, unique_prefix

FULL = os.environ.get("RK_METERED_FULL") == "1"
WINDOW = 60.0 if FULL else 5.0
SECONDS = 60.0 if FULL else 10.0
REQUESTS, TOKENS, MAX_TOKENS = (600, 30_000, 1000) if FULL else (100, 10_000, 400)
WINDOW_RULE = "minute" if FULL else "5s"

PYTHON_CLIENT = """
import json, sys, threading, time, urllib.request
import ratekeeper
url, store, prefix, requests, tokens, window, seconds, max_tokens = sys.argv[1:9]
llm = ratekeeper.Limiter({"requests": f"{requests}/{window}", "tokens": f"{tokens}/{window}"}, store,
                         prefix=prefix, on_error="raise")
deadline = time.time() + float(seconds)
def work():
    while time.time() < deadline:
        r = llm.reserve("mock-api", {"requests": 1, "tokens": int(max_tokens)}, wait=True,
                        timeout=max(0.0, deadline - time.time()))
        if not r.allowed:
            break
        with urllib.request.urlopen(f"{url}/complete?max_tokens={max_tokens}&at={r.decision.now}") as reply:
            used = json.load(reply)["usage"]["total_tokens"]
        r.settle(tokens=used)
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("done", flush=True)
"""

RUBY_CLIENT = """
require "json"
require "net/http"
require "ratekeeper"
url, store, prefix, requests, tokens, window, seconds, max_tokens = ARGV
llm = Ratekeeper::Limiter.new({ requests: "#{requests}/#{window}", tokens: "#{tokens}/#{window}" },
                              store: store, prefix: prefix, on_error: :raise)
deadline = Time.now.to_f + seconds.to_f
threads = 4.times.map do
  Thread.new do
    while Time.now.to_f < deadline
      r = llm.reserve("mock-api", cost: { requests: 1, tokens: max_tokens.to_i }, wait: true,
                                  timeout: [deadline - Time.now.to_f, 0].max)
      break unless r.allowed?

      reply = Net::HTTP.get(URI("#{url}/complete?max_tokens=#{max_tokens}&at=#{r.decision.now}"))
      r.settle(tokens: JSON.parse(reply)["usage"]["total_tokens"])
    end
  end
end
threads.each(&:join)
puts "done"
"""


class MockApi(BaseHTTPRequestHandler):
    """Answers /complete with a random 10 % to 100 % of max_tokens, recording it."""

    calls: list = []
    lock = threading.Lock()

    def do_GET(self):
        query = parse_qs(urlparse(self.path).query)
        asked = int(query["max_tokens"][0])
        used = random.randint(max(1, asked // 10), asked)
        with self.lock:
            self.calls.append((float(query["at"][0]), used))
        body = json.dumps({"usage": {"total_tokens": used}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def most_in_a_window(calls, window):
    """The most requests and the most tokens of calls reserved within any window."""
    calls = sorted(calls)
    most_requests = most_tokens = 0
    start = tokens = 0
    for end, (at, used) in enumerate(calls):
        tokens += used
        while calls[start][0] <= at - window:
            tokens -= calls[start][1]
            start += 1
        most_requests = max(most_requests, end - start + 1)
        most_tokens = max(most_tokens, tokens)
    return most_requests, most_tokens


def test_three_processes_call_a_metered_api_within_both_meters(redis_url):
    MockApi.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), MockApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    prefix = unique_prefix()
    args = [url, redis_url, prefix, str(REQUESTS), str(TOKENS), WINDOW_RULE, str(SECONDS), str(MAX_TOKENS)]
    env = {**os.environ, "RUBYLIB": os.path.join(ROOT, "ruby", "lib") + os.pathsep + os.environ.get("RUBYLIB", "")}
    clients = [subprocess.Popen([sys.executable, "-c", PYTHON_CLIENT, *args], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    clients.append(subprocess.Popen(["ruby", "-e", RUBY_CLIENT, *args], stdout=subprocess.PIPE, text=True, env=env))
    try:
        outs = [client.communicate(timeout=SECONDS + 60)[0] for client in clients]
    finally:
        for client in clients:
            client.kill()
        server.shutdown()
    assert all(out.strip() == "done" for out in outs), outs
    calls = sorted(MockApi.calls)
    most_requests, most_tokens = most_in_a_window(calls, WINDOW)
    # what an ideal meter admits in the whole windows of the run from the first call on
    first = calls[0][0]
    windows = int(SECONDS // WINDOW)
    used = sum(tokens for at, tokens in calls if at < first + windows * WINDOW)
    ideal = TOKENS * windows
    print(f"{len(calls)} calls, most in a window: {most_requests} requests, {most_tokens} tokens; "
          f"{used} tokens used in the first {windows} windows ({used / ideal:.1%} of an ideal meter's {ideal})")
    assert most_requests <= REQUESTS and most_tokens <= TOKENS
    assert used >= 0.9 * ideal, f"{used} tokens used of an ideal {ideal}: refunds did not return quota"
