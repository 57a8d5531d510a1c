"""A policy's ``identity:FIELD`` key reads a form or JSON body field at the
awaited doors as at WSGI, Django and Rack: the ASGI middleware and the
FastAPI policy dependency under uvicorn, over HTTP, on Redis. The body
still reaches the route whole; a body too large to read, or hostile bytes,
leaves the request unkeyed (not limited by that throttle), never broken."""

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from conftest import ROOT, unique_prefix
from test_async import uvicorn  # noqa: F401 (the fixture)

SERVERS = str(Path(ROOT) / "tests" / "python" / "servers")


def post(url: str, body: bytes, kind: str):
    """(status, parsed JSON body) of a POST."""
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def as_json(email: str) -> bytes:
    return json.dumps({"email": email, "password": "x"}).encode()


def as_form(email: str) -> bytes:
    return urlencode({"email": email, "password": "x"}).encode()


@pytest.fixture
def base(uvicorn, redis_url):  # noqa: F811
    return uvicorn("identity_asgi:app", {"RATEKEEPER_STORE": redis_url, "RATEKEEPER_PREFIX": unique_prefix()},
                   SERVERS)


@pytest.mark.parametrize("route", ["/login", "/dep/login"])
def test_a_body_field_keys_the_throttle_and_the_body_reaches_the_route(base, route):
    url = base + route
    # one person, written three ways, in a JSON body and a form: one quota
    sent = [(as_json("Alice@Example.com"), "application/json"),
            (as_form(" alice@example.com "), "application/x-www-form-urlencoded"),
            (as_json("ALICE@example.com"), "application/json; charset=utf-8")]
    answers = [post(url, body, kind) for body, kind in sent]
    assert [status for status, _ in answers] == [200, 200, 429]
    assert answers[2][1]["error"] == "rate_limited"
    for (body, _), (_, seen) in zip(sent[:2], answers[:2]):
        assert seen == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}, "the body reached the route"
    # another person has a quota of their own
    assert post(url, as_json("bob@example.com"), "application/json")[0] == 200
    # no field, a blank one, another content type: the throttle does not apply
    for body, kind in [(b'{"password": "x"}', "application/json"), (as_json("   "), "application/json"),
                       (b"email=alice@example.com", "text/plain")] * 2:
        assert post(url, body, kind)[0] == 200


@pytest.mark.parametrize("route", ["/login", "/dep/login"])
def test_hostile_and_large_bodies_pass_whole_and_unkeyed(base, route):
    url = base + route
    hostile = [b"email=\xff\xfe%00\r\n", b'{"email": "a\\u0000b\\r\\nc"}', b"\xff" * 4096, b'{"email": ',
               b"email=" + b"%ff" * 20_000]
    for body in hostile:
        for kind in ("application/x-www-form-urlencoded", "application/json"):
            status, seen = post(url, body, kind)
            assert status in (200, 429), (body[:40], kind, status)
            if status == 200:
                assert seen["length"] == len(body)
    large = as_json("carol@example.com") + b" " * (70 * 1024)  # over the 64 KiB a door reads
    for _ in range(4):
        status, seen = post(url, large, "application/json")
        assert status == 200, "too large to read for a key: not limited by that throttle"
        assert seen == {"length": len(large), "sha256": hashlib.sha256(large).hexdigest()}
