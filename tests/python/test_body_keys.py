"""A policy's ``identity:FIELD`` key reads a form or JSON body field at the
awaited doors as at WSGI, Django and Rack: the ASGI middleware and the
FastAPI policy dependency under uvicorn, over HTTP, on Redis. The body
still reaches the route whole; hostile bytes never break it; a body the
door cannot read (too large, chunked, multipart, a type it does not parse)
counts the client instead of the field, never skipping the throttle; a
repeated field counts every value; look-alike spellings are one person."""

import hashlib
import http.client
import io
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from conftest import ROOT, unique_prefix
from test_async import uvicorn  # noqa: F401 (the fixture)
from ratekeeper.body import MAX_BODY

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
    # no field, a blank one: the throttle does not apply
    for body, kind in [(b'{"password": "x"}', "application/json"), (as_json("   "), "application/json")] * 2:
        assert post(url, body, kind)[0] == 200


@pytest.mark.parametrize("route", ["/login", "/dep/login"])
def test_hostile_bodies_pass_whole(base, route):
    url = base + route
    hostile = [b"email=\xff\xfe%00\r\n", b'{"email": "a\\u0000b\\r\\nc"}', b"\xff" * 4096, b'{"email": ',
               b"email=" + b"%ff" * 20_000]
    for body in hostile:
        for kind in ("application/x-www-form-urlencoded", "application/json"):
            status, seen = post(url, body, kind)
            assert status in (200, 429), (body[:40], kind, status)
            if status == 200:
                assert seen["length"] == len(body)


def post_chunked(url: str, body: bytes, kind: str = "application/json") -> int:
    """The status of a POST whose body comes chunked (no Content-Length)."""
    host, _, path = url[len("http://"):].partition("/")
    conn = http.client.HTTPConnection(*host.split(":"), timeout=10)
    try:
        conn.putrequest("POST", "/" + path)
        conn.putheader("Content-Type", kind)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("route", ["/login", "/dep/login"])
def test_a_body_the_door_cannot_read_counts_the_client(base, route):
    url = base + route
    large = as_json("carol@example.com") + b" " * (70 * 1024)  # over the 64 KiB a door reads
    status, seen = post(url, large, "application/json")
    assert status == 200 and seen == {"length": len(large), "sha256": hashlib.sha256(large).hexdigest()}
    multipart = (b'--XyZ\r\nContent-Disposition: form-data; name="email"\r\n\r\ndave@example.com\r\n--XyZ--\r\n')
    # each a fresh person, each a body this door does not read: the
    # client's quota (2/minute) holds them all
    statuses = [post_chunked(url, as_json("erin@example.com")),
                post(url, multipart, "multipart/form-data; boundary=XyZ")[0],
                post(url, b"email=frank@example.com", "text/plain")[0]]
    assert statuses == [200, 429, 429], statuses


@pytest.mark.parametrize("route", ["/login", "/dep/login"])
def test_json_types_repeated_fields_and_look_alikes_are_one_person(base, route):
    url = base + route
    sent = [(as_json("alice@example.com"), "application/merge-patch+json"),
            # junk first, the victim last (the value Django, Rack and Starlette serve)
            (b"email=junk1%40example.com&email=alice%40example.com", "application/x-www-form-urlencoded"),
            (as_json("\uff41lice@example.com"), "application/json"),  # a fullwidth a
            (b"email=alice%40example.com&email=junk2%40example.com", "application/x-www-form-urlencoded"),
            (as_json("alic\uff45@EXAMPLE.com"), "text/x-json")]
    assert [post(url, body, kind)[0] for body, kind in sent] == [200, 200, 429, 429, 429]
    # the junk of the second request was counted too: one left
    assert [post(url, as_json("junk1@example.com"), "application/json")[0] for _ in range(2)] == [200, 429]


FORM, JSON = "application/x-www-form-urlencoded", "application/json"
# (content type, body, Content-Length sent, what every door's reader answers for "email")
BODIES = [
    (JSON, b'{"email": "Alice@Example.com"}', True, "Alice@Example.com"),
    (JSON, b'{"email": 42}', True, None),
    (JSON, b'{"email": true}', True, None),
    (JSON, b'{"email": {"address": "a@example.com"}}', True, None),
    (JSON, b'{"email": ["a@example.com", "b@example.com"]}', True, None),
    (JSON, b'["email"]', True, None),
    (JSON, b'{"email": ', True, None),
    ("application/merge-patch+json; charset=utf-8", b'{"email": "a@example.com"}', True, "a@example.com"),
    (FORM, b"email=a%40example.com&password=x", True, "a@example.com"),
    (FORM, b"email=junk%40example.com&email=a%40example.com", True, ["junk@example.com", "a@example.com"]),
    (FORM, b"email=&password=x", True, ""),
    (FORM, b"password=x", True, None),
    # over the cap, however it starts: the door does not read it
    (JSON, b'{"email": "a@example.com"}' + b" " * MAX_BODY, True, False),
    (FORM, b"email=a%40example.com&pad=" + b"x" * MAX_BODY, True, False),
    # without a length (chunked), multipart, a type no framework parses as a form or JSON
    (JSON, b'{"email": "a@example.com"}', False, False),
    ("multipart/form-data; boundary=XyZ",
     b'--XyZ\r\nContent-Disposition: form-data; name="email"\r\n\r\na@example.com\r\n--XyZ--\r\n', True, False),
    ("text/plain", b"email=a@example.com", True, False),
    (JSON, b"", True, None),
]


def wsgi_environ(kind: str, body: bytes, sized: bool) -> dict:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/login", "SERVER_NAME": "testserver", "SERVER_PORT": "80",
               "REMOTE_ADDR": "203.0.113.5", "CONTENT_TYPE": kind, "wsgi.input": io.BytesIO(body),
               "wsgi.url_scheme": "http"}
    if sized:
        environ["CONTENT_LENGTH"] = str(len(body))
    else:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
    return environ


def django_requests(kind: str, body: bytes, sized: bool):
    """The request as Django builds it under WSGI and under ASGI, and under
    WSGI once request.POST was read (as the CSRF middleware does)."""
    from django.core.handlers.asgi import ASGIRequest
    from django.core.handlers.wsgi import WSGIRequest

    headers = [(b"content-type", kind.encode())]
    headers.append((b"content-length", str(len(body)).encode()) if sized else (b"transfer-encoding", b"chunked"))
    scope = {"type": "http", "method": "POST", "path": "/login", "headers": headers, "client": ("203.0.113.5", 1),
             "server": ("testserver", 80), "query_string": b""}
    posted = WSGIRequest(wsgi_environ(kind, body, sized))
    posted.POST  # noqa: B018 (parsed first)
    return [WSGIRequest(wsgi_environ(kind, body, sized)), ASGIRequest(scope, io.BytesIO(body)), posted]


@pytest.mark.parametrize("kind, body, sized, wanted", BODIES, ids=[f"{i}-{b[0]}" for i, b in enumerate(BODIES)])
def test_django_reads_a_body_field_as_the_wsgi_door_does(kind, body, sized, wanted):
    """One reader, one cap, one answer: Django's identity:FIELD reader gives
    what the WSGI door's does for the same body (a string, a list for a
    repeated form field, None for a JSON value that is not a string, False
    for a body over the cap, without a length or of a type not parsed)."""
    from ratekeeper.django.keys import body_field as django_field
    from ratekeeper.wsgi import body_field as wsgi_field

    assert wsgi_field(wsgi_environ(kind, body, sized), "email") == wanted
    answers = [django_field(request, "email") for request in django_requests(kind, body, sized)]
    assert answers == [wanted] * 3
    assert all(type(answer) is type(wanted) for answer in answers)
