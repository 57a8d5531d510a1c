"""The gate's conformance table (tests/cases/gate.json, under the policy
tests/cases/gate.toml) through every Python door and the edge server: the
WSGI and ASGI middlewares, the FastAPI policy dependency, Django sync and
async (POLICY_FILE), forward auth over HTTP (asked directly, and behind
nginx with README's recipe), Envoy's rate limit service over gRPC, and the
Rack middleware under puma, each on memory, Redis and Redis Cluster; every
request of the table must get the same answer from each, and the doors
whose counters the test reads must have answered the steps marked
'cached' from the denial cache. (Rack through Rack::MockRequest:
tests/ruby/test_gate_table.rb.)"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from conftest import ROOT, configured, unique_prefix
from edge import EdgeServer, request, rls_modules

TABLE = json.loads((Path(ROOT) / "tests" / "cases" / "gate.json").read_text())
POLICY = (Path(ROOT) / "tests" / "cases" / "gate.toml").read_text()
CASES = sorted(TABLE["cases"])
PEER = "198.51.100.7"
sys.path.insert(0, str(Path(ROOT) / "tests" / "python" / "servers"))

Answer = Tuple[int, Dict[str, str], bytes]
# a door's answers to a case, and how many came from the denial cache (None:
# the test cannot read that door's counters)
Run = Tuple[List[Answer], Optional[int]]


def policy_file(tmp_path, store_url: str) -> Path:
    """The table's policy on `store_url` under a fresh prefix."""
    text = POLICY.replace('[store]\nurl = "memory://"', f'[store]\nurl = "{store_url}"\nprefix = "{unique_prefix()}"')
    assert text != POLICY
    path = tmp_path / f"gate-{unique_prefix()}.toml"
    path.write_text(text)
    return path


@pytest.fixture(params=["memory", "redis", "cluster"])
def store_url(request, redis_url) -> str:
    if request.param == "cluster":
        return configured("RATEKEEPER_TEST_CLUSTER")
    return "memory://" if request.param == "memory" else redis_url


def check(door: str, case: str, answers: List[Answer]) -> None:
    """Each answer is what the table expects (through Envoy, whose filter
    answers every OVER_LIMIT with one status, a block's 403 is its 429)."""
    assert len(answers) == len(TABLE["cases"][case]), f"{door}: {case!r}: one answer per request"
    for i, (step, (status, headers, body)) in enumerate(zip(TABLE["cases"][case], answers)):
        where = f"{door}: {case!r}, request {i}"
        wanted = 429 if door == "envoy" and step["status"] == 403 else step["status"]
        assert status == wanted, f"{where}: {status} {body[:200]!r}"
        if "error" in step:
            assert json.loads(body)["error"] == step["error"], where
        lower = {k.lower(): v for k, v in headers.items()}
        for name, want in step.get("expect", {}).items():
            got = lower.get(name.lower())
            if want is None:
                assert got is None, f"{where}: {name} is {got!r}"
            elif want == "*":
                assert got is not None, f"{where}: {name} is missing"
            else:
                assert got == want, f"{where}: {name} is {got!r}, not {want!r}"


def cached_denials(gate: Any) -> int:
    """Denials a Python gate answered from its denial cache, over its throttles."""
    return sum(stats["cached_denials"] for stats in gate.stats.values())


def forwarded_for(step: Dict[str, Any]) -> str:
    """X-Forwarded-For as a proxy on 127.0.0.1 (trusted by the policy) sends
    it for a step: what the step's peer sent, then the peer."""
    given = step.get("headers", {}).get("X-Forwarded-For")
    return ", ".join(x for x in (given, step.get("peer", PEER)) if x)


def proxied(step: Dict[str, Any]) -> Dict[str, str]:
    """A step's headers as a proxy on 127.0.0.1 (trusted by the policy)
    passes them on: X-Forwarded-For with the step's peer appended, and a
    tier claim (X-Plan) only from a trusted peer (the proxy in front clears
    a client's own, as docs/edge.md says; the gate believes the header only
    from a trusted proxy, which the direct doors show)."""
    headers = dict(step.get("headers", {}))
    if step.get("peer", PEER) != "127.0.0.1":
        headers.pop("X-Plan", None)
    headers["X-Forwarded-For"] = forwarded_for(step)
    return headers


def environ(step: Dict[str, Any]) -> Dict[str, Any]:
    """A WSGI environ (Django's META too) for a step of the table."""
    import io

    env = {"REQUEST_METHOD": step["method"], "PATH_INFO": step["path"], "QUERY_STRING": step.get("query", ""),
           "REMOTE_ADDR": step.get("peer", PEER), "HTTP_HOST": "example.com", "SERVER_NAME": "example.com",
           "SERVER_PORT": "80", "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http"}
    for name, value in step.get("headers", {}).items():
        env["HTTP_" + name.upper().replace("-", "_")] = value
    return env


def run_wsgi(path: Path, case: str) -> Run:
    from ratekeeper.wsgi import RateLimitMiddleware

    def app(env, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    door = RateLimitMiddleware(app, policy=str(path))
    answers = []
    for step in TABLE["cases"][case]:
        seen: Dict[str, Any] = {}
        body = b"".join(door(environ(step), lambda status, headers, exc=None: seen.update(s=status, h=headers)))
        answers.append((int(seen["s"].split()[0]), dict(seen["h"]), body))
    return answers, cached_denials(door.gate)


def asgi_answers(make_app: Callable[[], Any], case: str) -> Tuple[List[Answer], Any]:
    """The answers an ASGI app (made in the loop that runs it) gives the
    case's requests, and the app."""
    async def run() -> Tuple[List[Answer], Any]:
        door = make_app()
        answers = []
        for step in TABLE["cases"][case]:
            headers = [(b"host", b"example.com")] + [(k.lower().encode(), v.encode())
                                                     for k, v in step.get("headers", {}).items()]
            scope = {"type": "http", "method": step["method"], "path": step["path"], "headers": headers,
                     "query_string": step.get("query", "").encode(), "client": (step.get("peer", PEER), 5000),
                     "http_version": "1.1", "scheme": "http", "server": ("example.com", 80), "root_path": "",
                     "raw_path": step["path"].encode()}
            sent: List[dict] = []

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            await door(scope, receive, send)
            start = sent[0]
            answers.append((start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
                            b"".join(m.get("body", b"") for m in sent[1:])))
        return answers, door

    return asyncio.run(run())


def run_asgi(path: Path, case: str) -> Run:
    from ratekeeper.asgi import RateLimitMiddleware

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    answers, door = asgi_answers(lambda: RateLimitMiddleware(app, policy=str(path)), case)
    return answers, cached_denials(door.gate)


def run_fastapi(path: Path, case: str) -> Run:
    """A FastAPI app whose every route the policy dependency guards."""
    from fastapi import Depends, FastAPI

    import ratekeeper.fastapi

    def make() -> Any:
        app = FastAPI(dependencies=[Depends(ratekeeper.fastapi.policy(str(path)))])
        ratekeeper.fastapi.setup(app)
        # a value, not a Response: FastAPI adds the dependency's headers to the response it builds
        app.add_api_route("/{rest:path}", lambda: "ok", methods=["GET", "POST"])
        return app

    return asgi_answers(make, case)[0], None


def run_django(path: Path, case: str, is_async: bool) -> Run:
    from django.test import AsyncClient, Client, override_settings

    with override_settings(RATEKEEPER={"POLICY_FILE": str(path)}, ROOT_URLCONF="gate_urls"):
        answers = []
        for step in TABLE["cases"][case]:
            url = step["path"] + (f"?{step['query']}" if step.get("query") else "")
            headers = {"Host": "example.com", **step.get("headers", {})}
            if is_async:  # the test client's ASGI peer is 127.0.0.1: the table's peer comes as a proxy gives it
                headers = {"Host": "example.com", **proxied(step)}
                response = asyncio.run(AsyncClient().generic(step["method"], url, headers=headers))
            else:
                response = Client(REMOTE_ADDR=step.get("peer", PEER)).generic(step["method"], url, headers=headers)
            answers.append((response.status_code, dict(response.items()), response.content))
        return answers, None


def edge_cached_denials(server: EdgeServer) -> int:
    """Denials the edge server answered from its denial cache (/metrics)."""
    return int(sum(v for k, v in server.metrics().items() if k.startswith("ratekeeper_cached_denials_total")))


def run_forward_auth(path: Path, case: str, tmp_path) -> Run:
    server = EdgeServer(tmp_path, path.read_text())
    try:
        answers = []
        for step in TABLE["cases"][case]:
            headers = {**proxied(step),
                       "X-Forwarded-Method": step["method"], "X-Forwarded-Host": "example.com",
                       "X-Forwarded-Uri": step["path"] + (f"?{step['query']}" if step.get("query") else "")}
            answers.append(request(server.port, "/auth", headers))
        return answers, edge_cached_denials(server)
    finally:
        assert server.stop() == 0, server.log()[-2000:]


def run_forward_auth_nginx(path: Path, case: str, tmp_path) -> Run:
    """Forward auth behind nginx with README's recipe (nginx answering as
    the app), over HTTP: nginx passes the client's X-Forwarded-For with
    its peer (127.0.0.1, trusted) appended, as an nginx behind a load
    balancer does; a denial reaches the client as README's 429."""
    from edge import nginx

    server = EdgeServer(tmp_path, path.read_text())
    front = None
    try:
        front, port = nginx(tmp_path, server.port, None, behind_proxy=True)
        answers = []
        for step in TABLE["cases"][case]:
            headers = {**proxied(step), "Host": "example.com"}
            url = step["path"] + (f"?{step['query']}" if step.get("query") else "")
            answers.append(request(port, url, headers, step["method"]))
        return answers, edge_cached_denials(server)
    finally:
        if front is not None:
            front.stop()
        assert server.stop() == 0, server.log()[-2000:]


def run_envoy(path: Path, case: str, tmp_path) -> Run:
    """Envoy's rate limit service over gRPC, asked as Envoy's ratelimit
    filter asks when the route's actions describe the request (one
    descriptor: remote_address, request_headers for :method, :path and
    :authority and for each header the request has); its answer rendered
    as the filter renders it (OVER_LIMIT: one status, 429, for a denial and
    a block alike: a block is told by its body)."""
    import grpc

    rls_pb2, rls_grpc, ratelimit_pb2 = rls_modules(tmp_path)
    server = EdgeServer(tmp_path, path.read_text(), grpc=True)
    try:
        answers = []
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = rls_grpc.RateLimitServiceStub(channel)
            for step in TABLE["cases"][case]:
                entries = [("remote_address", step.get("peer", PEER)), (":method", step["method"]),
                           (":path", step["path"] + (f"?{step['query']}" if step.get("query") else "")),
                           (":authority", "example.com")]
                entries += [(name.lower(), value) for name, value in step.get("headers", {}).items()]
                descriptor = ratelimit_pb2.RateLimitDescriptor(
                    entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries])
                reply = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=[descriptor]))
                over = reply.overall_code == rls_pb2.RateLimitResponse.Code.OVER_LIMIT
                answers.append((429 if over else 200, {h.key: h.value for h in reply.response_headers_to_add},
                                reply.raw_body if over else b"ok"))
        return answers, None
    finally:
        assert server.stop() == 0, server.log()[-2000:]


def run_rack_puma(path: Path, case: str, tmp_path) -> Run:
    """The Rack middleware given the policy file, in an app under puma (one
    process: the memory store is a process's own), over HTTP; the table's
    peer comes as the trusted proxy 127.0.0.1 gives it."""
    from edge import puma_rack, stop_all

    app, port = puma_rack(tmp_path, "policy", "", "", policy=str(path), probe="/health", workers=0)
    try:
        answers = []
        for step in TABLE["cases"][case]:
            headers = {**proxied(step), "Host": "example.com"}
            url = step["path"] + (f"?{step['query']}" if step.get("query") else "")
            answers.append(request(port, url, headers, step["method"]))
        return answers, None
    finally:
        stop_all(app)


DOORS: Dict[str, Callable[..., Run]] = {
    "rack-puma": run_rack_puma,
    "wsgi": lambda path, case, tmp_path: run_wsgi(path, case),
    "asgi": lambda path, case, tmp_path: run_asgi(path, case),
    "fastapi": lambda path, case, tmp_path: run_fastapi(path, case),
    "envoy": run_envoy,
    "django": lambda path, case, tmp_path: run_django(path, case, False),
    "django-async": lambda path, case, tmp_path: run_django(path, case, True),
    "forward-auth": run_forward_auth,
    "forward-auth-nginx": run_forward_auth_nginx,
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_case_through_the_door(door, store_url, tmp_path):
    for case in CASES:
        answers, cached = DOORS[door](policy_file(tmp_path, store_url), case, tmp_path)
        check(door, case, answers)
        if cached is not None:  # the memory store keeps no denial cache
            remote = not store_url.startswith("memory://")
            want = sum(1 for step in TABLE["cases"][case] if step.get("cached")) if remote else 0
            assert cached == want, f"{door}: {case!r}: {cached} denials answered from the cache, not {want}"


# One client (the test's, 127.0.0.1, as every door sees it) through every
# part of the policy: the layered throttles, the exempt path, the blocklist
# and fail2ban; the answers compared by status, the error and the headers
# nginx's recipe passes on.
SEQUENCE = [("POST", "/login?email=a@example.com", {}), ("POST", "/login?email=a@example.com", {}),
            ("POST", "/login?email=a@example.com", {}), ("GET", "/api/items", {"X-Api-Key": "k1"}),
            ("GET", "/", {}), ("GET", "/health", {}), ("GET", "/admin/users", {}), ("GET", "/x.php", {}),
            ("GET", "/y.php", {}), ("GET", "/health", {}), ("GET", "/api/items", {"X-Api-Key": "k2"})]
SHOWN = ("x-ratelimit-limit", "x-ratelimit-remaining")


def shown(answer: Answer) -> Tuple[int, Any, Dict[str, str]]:
    status, headers, body = answer
    error = json.loads(body).get("error") if status != 200 else None
    lower = {k.lower(): v for k, v in headers.items()}
    return status, error, {name: lower[name] for name in SHOWN if name in lower}


def test_one_policy_file_in_django_rails_and_the_edge(redis_url, tmp_path):
    """One policy file, unchanged, in Django under gunicorn, in a Rails 6.1
    app under puma (2 workers; tests/ruby/servers/rails_policy, whose
    config.ratekeeper.policy names the file) and in the edge server behind
    nginx: a request sequence split across the three gets the answers one
    door (the WSGI middleware) gives."""
    from edge import gunicorn_django, nginx, puma_rack, stop_all

    def one_door() -> List[Answer]:
        from ratekeeper.wsgi import RateLimitMiddleware

        door = RateLimitMiddleware(lambda env, start: start("200 OK", []) or [b"ok"],
                                   policy=str(policy_file(tmp_path, redis_url)))
        answers = []
        for method, url, headers in SEQUENCE:
            path, _, query = url.partition("?")
            step = {"method": method, "path": path, "query": query, "headers": headers, "peer": "127.0.0.1"}
            seen: Dict[str, Any] = {}
            body = b"".join(door(environ(step), lambda status, hs, exc=None: seen.update(s=status, h=hs)))
            answers.append((int(seen["s"].split()[0]), dict(seen["h"]), body))
        return answers

    path = policy_file(tmp_path, redis_url)
    server = EdgeServer(tmp_path, path.read_text())
    started = []
    try:
        django, django_port = gunicorn_django(tmp_path, "policy", redis_url, "", policy=str(path), probe="/health")
        started.append(django)
        rails_app = os.path.join(ROOT, "tests", "ruby", "servers", "rails_policy", "config.ru")
        rack, rack_port = puma_rack(tmp_path, "policy", redis_url, "", policy=str(path), probe="/health",
                                    app=rails_app)
        started.append(rack)
        behind, behind_port = gunicorn_django(tmp_path, "proxied", redis_url, "unused")
        started.append(behind)
        front, front_port = nginx(tmp_path, server.port, behind_port)
        started.append(front)
        doors = [django_port, rack_port, front_port]
        split = []
        for i, (method, url, headers) in enumerate(SEQUENCE):
            if i == len(SEQUENCE) - 1:
                time.sleep(2.5)  # a ban reaches the other processes within controls_refresh (2 s)
            split.append(request(doors[i % 3], url, headers, method))
    finally:
        stop_all(*started)
        assert server.stop() == 0, server.log()[-2000:]
    assert [shown(a) for a in split] == [shown(a) for a in one_door()]
    assert [a[0] for a in split] == [200, 200, 429, 200, 429, 200, 403, 403, 403, 200, 403]
