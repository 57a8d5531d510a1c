"""The example Django project (examples/django_project) with Django's test
client against the test Redis: headers, 429 body, the login decorator, exempt
paths, user and IP keys, spoofed X-Forwarded-For, settings checks, async."""

import json
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import AsyncClient, Client, override_settings
from django.test.utils import setup_test_environment

from ratekeeper.django import Ratelimited, ratelimit
from ratekeeper.django.conf import get_config
from conftest import unique_prefix


@pytest.fixture(scope="module", autouse=True)
def database():
    setup_test_environment()
    call_command("migrate", verbosity=0, run_syncdb=True)


@pytest.fixture(autouse=True)
def fresh_quota(redis_url, settings_override):
    yield


@pytest.fixture
def settings_override(redis_url):
    """The example's settings with a fresh prefix, so every test starts with a clean quota."""
    from django.conf import settings

    config = dict(settings.RATEKEEPER, STORE=redis_url, PREFIX=unique_prefix())
    with override_settings(RATEKEEPER=config):
        yield config


def client(ip="203.0.113.5", **extra):
    return Client(REMOTE_ADDR=ip, **extra)


def post_form(c, path, data):
    """A form posted as a browser posts one (urlencoded: the body every door reads)."""
    return c.post(path, urlencode(data), content_type="application/x-www-form-urlencoded")


def test_headers_then_429_after_the_configured_requests():
    c = client()
    for i in range(5):
        response = c.get("/")
        assert response.status_code == 200, i
        assert response["X-RateLimit-Limit"] == "5"
        assert response["X-RateLimit-Remaining"] == str(4 - i)
        assert response["RateLimit-Policy"] == '"1s";q=5;w=1, "1m";q=20;w=60'
    denied = c.get("/")
    assert denied.status_code == 429
    assert denied["Content-Type"] == "application/json"
    assert denied["Retry-After"] == "1"
    assert json.loads(denied.content) == {"error": "rate_limited", "retry_after": 1}
    assert denied["X-RateLimit-Remaining"] == "0"
    # another client is not affected
    assert client("203.0.113.6").get("/").status_code == 200


def test_a_pass_adds_its_headers_where_the_view_set_none_by_that_name(monkeypatch):
    """The rate-limit headers go straight into Django's header store where it
    keeps them as Django 3.2 to 6.x do (every Django of the matrix): the same
    headers, in the same order, as Django's own checks put them, and a
    view's own header of a name (in any case) is kept."""
    from django.http import HttpResponse, StreamingHttpResponse
    from django.test import RequestFactory

    from ratekeeper.django import limiting

    assert limiting._FAST_HEADERS, "this Django keeps its headers another way"
    gate = get_config().gate
    request = RequestFactory().get("/", REMOTE_ADDR="203.0.113.50")
    verdict = limiting.decide(gate, request)
    assert verdict.ending == "pass" and len(verdict.answer.headers) == 6

    def rendered(fast, response):
        monkeypatch.setattr(limiting, "_FAST_HEADERS", fast)
        response["x-ratelimit-limit"] = "999"
        limiting._headers(response, verdict)
        return list(response.items()), response.serialize_headers() if hasattr(response, "serialize_headers") else b""

    for make in (lambda: HttpResponse("ok"), lambda: StreamingHttpResponse(iter([b"ok"]))):
        fast, slow = rendered(True, make()), rendered(False, make())
        assert fast == slow
        items = dict(fast[0])
        assert items["x-ratelimit-limit"] == "999" and "X-RateLimit-Limit" not in items
        assert items["X-RateLimit-Remaining"] == "4"
        assert items["RateLimit-Policy"] == '"1s";q=5;w=1, "1m";q=20;w=60'


def test_exempt_paths_are_never_limited():
    c = client()
    for _ in range(12):
        response = c.get("/health")
        assert response.status_code == 200
        assert "X-RateLimit-Limit" not in response


def test_spoofed_forwarded_for_does_not_buy_quota():
    for i in range(5):
        assert client(HTTP_X_FORWARDED_FOR=f"1.1.1.{i}").get("/").status_code == 200
    assert client(HTTP_X_FORWARDED_FOR="9.9.9.9").get("/").status_code == 429


def test_trusted_proxy_forwarded_for_is_believed():
    for i in range(5):
        assert client("10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7").get("/").status_code == 200
    assert client("10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7").get("/").status_code == 429
    assert client("10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.8").get("/").status_code == 200


def test_users_are_keyed_by_user_not_ip():
    alice = User.objects.create_user("alice-" + unique_prefix(), password="pw")
    bob = User.objects.create_user("bob-" + unique_prefix(), password="pw")
    a, b = client(), client()
    a.force_login(alice)
    b.force_login(bob)
    for _ in range(5):
        assert a.get("/").status_code == 200
    assert a.get("/").status_code == 429
    # same IP, another user: its own quota
    assert b.get("/").status_code == 200


def test_login_view_is_limited_per_posted_email():
    c = client()
    for i in range(3):
        assert post_form(c, "/login", {"email": "victim@example.com", "password": str(i)}).status_code == 401
    denied = post_form(c, "/login", {"email": "victim@example.com", "password": "x"})
    assert denied.status_code == 429
    assert denied["X-RateLimit-Limit"] in {"3", "5"}
    # another address, and GETs of the form, are not limited by this decorator
    assert post_form(client("198.18.0.1"), "/login", {"email": "other@example.com"}).status_code == 401
    assert client("198.18.0.2").get("/login").status_code == 200


def test_path_rules_apply_to_their_methods_and_key():
    c = client()
    for _ in range(3):
        assert c.post("/api/items", HTTP_X_API_KEY="k1").status_code == 200
    denied = c.post("/api/items", HTTP_X_API_KEY="k1")
    assert denied.status_code == 429 and denied["X-RateLimit-Limit"] == "3"
    assert c.post("/api/items", HTTP_X_API_KEY="k2").status_code == 200
    # GET is not under the POST rule: it falls back to the default rules
    assert client("198.18.0.3").get("/api/items", HTTP_X_API_KEY="k1")["X-RateLimit-Limit"] == "5"


def test_a_path_rule_applies_to_any_http_method_it_names(settings_override):
    """WebDAV's PROPFIND is an HTTP method to Django's settings as it is to
    Rack and the edge server (the core checks the names for every door)."""
    paths = [{"path": "/dav/", "rules": "2/minute", "key": "ip", "methods": ["propfind"]}]
    with override_settings(RATEKEEPER=dict(settings_override, PATHS=paths)):
        c = client("198.18.0.9")
        answers = [c.generic("PROPFIND", "/dav/x")["X-RateLimit-Limit"] for _ in range(2)]
        assert answers == ["2", "2"]
        assert c.generic("PROPFIND", "/dav/x").status_code == 429
        assert c.get("/dav/x")["X-RateLimit-Limit"] != "2", "GET is not under the PROPFIND rule"


def test_an_in_flight_path_holds_its_slot_until_the_response_is_closed(settings_override, monkeypatch):
    """"1 concurrent" on a path: a response not yet closed holds the slot
    (a second request is 429); closing it gives the slot back, once however
    often it is closed; the test client closes every response it gets."""
    from django.http import HttpResponse
    from django.test import RequestFactory

    from ratekeeper.django import limiting
    from ratekeeper.django.middleware import RateLimitMiddleware

    told = []
    tell_end = limiting.tell_end
    monkeypatch.setattr(limiting, "tell_end", lambda verdict, status, headers=None: (told.append(status), tell_end(verdict, status, headers)))
    paths = [{"path": "/export/", "rules": "1 concurrent; 100/minute", "key": "ip"}]
    with override_settings(RATEKEEPER=dict(settings_override, PATHS=paths)):
        middleware = RateLimitMiddleware(lambda request: HttpResponse("ok"))
        factory = RequestFactory(REMOTE_ADDR="198.18.0.7")
        first = middleware(factory.get("/export/a"))
        assert first.status_code == 200
        assert middleware(factory.get("/export/a")).status_code == 429, "the slot is held until the close"
        first.close()
        first.close()
        assert told == [200], "told once, with the response's status"
        (limiter,) = [held for scope, held in get_config().gate.limiters().items() if "export" in scope]
        assert limiter.leases("198.18.0.7") == []
        c = client("198.18.0.7")
        assert 429 not in [c.get("/export/a").status_code for _ in range(3)]
        assert limiter.leases("198.18.0.7") == [], "the test client closed each response"


def test_a_path_rule_in_shadow_mode_logs_what_it_would_deny_and_denies_nothing(settings_override, caplog):
    """A PATHS entry with "shadow": True is tried in production: it counts,
    its denials are logged (shadow=true) and let through with none of its
    headers; the default rules still refuse."""
    paths = [{"path": "/", "rules": "1/minute", "key": "ip", "scope": "trial", "shadow": True}]
    with override_settings(RATEKEEPER=dict(settings_override, PATHS=paths, RULES="3/minute")):
        c = client("198.18.0.10")
        with caplog.at_level("INFO", logger="ratekeeper.denials"):
            answers = [c.get("/") for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert [a["X-RateLimit-Limit"] for a in answers[:3]] == ["3", "3", "3"], "never the trial's limit"
        lines = [r.getMessage() for r in caplog.records if r.name == "ratekeeper.denials"]
        assert [line.endswith(" shadow=true") for line in lines] == [True, True, False], lines
        assert all('scope="trial"' in line for line in lines[:2]), lines
        assert get_config().limiters()["trial"].stats["denied"] >= 2, "counted as the denials it would make"


def test_raise_mode_raises_ratelimited(settings_override):
    from django.http import HttpResponse
    from django.test import RequestFactory

    from ratekeeper.django.middleware import RateLimitMiddleware

    with override_settings(RATEKEEPER=dict(settings_override, RAISE=True, RULES="1/minute")):
        middleware = RateLimitMiddleware(lambda request: HttpResponse("ok"))
        factory = RequestFactory(REMOTE_ADDR="192.0.2.9")
        assert middleware(factory.get("/")).status_code == 200
        with pytest.raises(Ratelimited) as caught:
            middleware(factory.get("/"))
        assert caught.value.decision is not None and not caught.value.decision.allowed
        # Ratelimited is a PermissionDenied: left to Django, it becomes a 403
        assert client("192.0.2.10").get("/").status_code == 200
        assert client("192.0.2.10").get("/").status_code == 403


def test_custom_responder_and_status(settings_override):
    with override_settings(RATEKEEPER=dict(settings_override, RULES="1/minute", STATUS=503)):
        c = client()
        c.get("/")
        assert c.get("/").status_code == 503
    responder = "demo_responders.teapot"
    import sys
    import types

    module = types.ModuleType("demo_responders")
    from django.http import HttpResponse

    module.teapot = lambda request, decision: HttpResponse(f"wait {decision.retry_after}", status=418)
    sys.modules["demo_responders"] = module
    with override_settings(RATEKEEPER=dict(settings_override, RULES="1/minute", RESPONDER=responder, PREFIX=unique_prefix())):
        c = client()
        c.get("/")
        denied = c.get("/")
        assert denied.status_code == 418 and denied.content.startswith(b"wait ")
        assert denied["Retry-After"]


def test_tiers(settings_override):
    def tier_of(request):
        return request.headers.get("X-Plan")

    with override_settings(RATEKEEPER=dict(settings_override, TIERS={"free": "1/minute", "pro": "3/minute"}, TIER=tier_of)):
        c = client()
        assert c.get("/", HTTP_X_PLAN="free").status_code == 200
        assert c.get("/", HTTP_X_PLAN="free").status_code == 429
        # an upgrade keeps the key's history: 1 of pro's 3 is used
        for _ in range(2):
            response = c.get("/", HTTP_X_PLAN="pro")
            assert response.status_code == 200 and response["X-RateLimit-Limit"] == "3"
        assert c.get("/", HTTP_X_PLAN="pro").status_code == 429
        # a tier stored for the key wins over the callable's, from the next request
        other = client("203.0.113.77")
        assert other.get("/", HTTP_X_PLAN="free").status_code == 200
        assert other.get("/", HTTP_X_PLAN="free").status_code == 429
        get_config().gate.admin().set_tier("ip:203.0.113.77", "pro")  # the KEY is user_or_ip
        assert other.get("/", HTTP_X_PLAN="free").status_code == 200


def test_disabled_limits_nothing(settings_override):
    with override_settings(RATEKEEPER=dict(settings_override, ENABLED=False)):
        c = client()
        assert all(c.get("/").status_code == 200 for _ in range(10))


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"RULES": "5/fortnight"}, "fortnight"),
        ({"STORE": "mysql://db"}, "mysql://db"),
        ({"KEY": "shoe_size"}, "shoe_size"),
        ({"TRUSTED_PROXIES": ["10.0.0.0/99"]}, "10.0.0.0/99"),
        ({"PATHS": [{"path": "/x"}]}, "PATHS"),
        ({"PATHS": [{"path": "/x", "rules": "1/s", "methods": ["GE T"]}]}, "'GE T' is not an HTTP method"),
        ({"VIEWS": {"demo.views.login": {"rules": "1/s", "methods": ["GET\r\n"]}}}, "is not an HTTP method"),
        ({"PATHS": [{"path": "/x", "rules": "1/s", "shadow": "yes"}]}, "expected a boolean"),
        ({"STATUS": 200}, "STATUS"),
        ({"TIERS": {"free": "1/fortnight"}}, "fortnight"),
        ({"RESPONDER": "no.such.module"}, "no.such.module"),
        ({"STOER": "memory://"}, "STOER"),
        ({"ON_ERROR": "explode"}, "explode"),
    ],
)
def test_system_checks_explain_bad_settings(settings_override, bad, needle):
    with override_settings(RATEKEEPER=dict(settings_override, **bad)):
        errors = [e for e in run_checks() if e.id.startswith("ratekeeper.E")]
        assert len(errors) == 1 and needle in errors[0].msg, errors


def test_system_checks_pass_on_the_example():
    assert [e for e in run_checks() if e.id.startswith("ratekeeper")] == []


def test_decorator_rejects_bad_rules_at_import():
    with pytest.raises(ValueError, match="5/fortnight"):
        ratelimit("5/fortnight")


def test_decorator_without_blocking_marks_the_request(settings_override):
    from django.http import HttpResponse
    from django.test import RequestFactory

    seen = []

    @ratelimit("1/minute", block=False, group="marks-" + unique_prefix())
    def view(request):
        seen.append(request.limited)
        return HttpResponse("ok")

    factory = RequestFactory(REMOTE_ADDR="192.0.2.1")
    assert view(factory.get("/")).status_code == 200
    assert view(factory.get("/")).status_code == 200
    assert seen == [False, True]


def test_async_view_and_middleware():
    import asyncio

    async def run():
        c = AsyncClient(REMOTE_ADDR="192.0.2.50")
        first = await c.get("/report")
        second = await c.get("/report")
        third = await c.get("/report")
        return first, second, third

    first, second, third = asyncio.run(run())
    assert first.status_code == 200 and first["X-RateLimit-Limit"] in {"2", "5"}
    assert second.status_code == 200
    assert third.status_code == 429
    assert json.loads(third.content)["error"] == "rate_limited"


def test_an_async_denial_on_a_django_without_signal_asend(monkeypatch):
    """Django 4.2 LTS has no Signal.asend (5.0 added it): an async view's
    denial is still a 429, and the rate_limited receivers still run."""
    import asyncio

    from ratekeeper.django.signals import rate_limited

    class Django42Signal:
        """rate_limited as Django 4.2 has it: send, and no asend."""

        def send(self, **sent):
            return rate_limited.send(**sent)

    monkeypatch.setattr("ratekeeper.django.limiting.rate_limited", Django42Signal())
    heard = []

    def receiver(sender, request, decision, scope, **kwargs):
        heard.append((request.path, scope, decision.allowed))

    rate_limited.connect(receiver)
    try:
        async def run():
            c = AsyncClient(REMOTE_ADDR="192.0.2.51")
            return [await c.get("/report") for _ in range(3)]

        statuses = [r.status_code for r in asyncio.run(run())]
    finally:
        rate_limited.disconnect(receiver)
    assert statuses == [200, 200, 429]
    assert [(path, allowed) for path, _, allowed in heard] == [("/report", False)]


def test_config_is_rebuilt_when_settings_change(settings_override):
    before = get_config()
    with override_settings(RATEKEEPER=dict(settings_override, RULES="7/minute")):
        assert get_config() is not before
        assert get_config().limiters()["default"].rules[0].limit == 7


def test_view_rules_by_url_name_and_dotted_path(settings_override):
    views = {"health": "1/minute", "demo.views.api_items": {"rules": "2/minute", "key": "ip"}}
    with override_settings(RATEKEEPER=dict(settings_override, VIEWS=views, EXEMPT_PATHS=[])):
        c = client("198.51.100.50")
        assert [c.get("/health").status_code for _ in range(2)] == [200, 429]
        assert [c.get("/api/items").status_code for _ in range(3)] == [200, 200, 429]
        # other views fall back to the default rules
        assert c.get("/")["X-RateLimit-Limit"] == "5"


def test_identity_keys_are_trimmed_lower_case_and_absent_means_unlimited(settings_override):
    """The login example (key="identity:email", 3/5min): one person is one
    quota however the address is typed, form or JSON; a post without it is
    not limited by this rule, rather than sharing one key with every other."""
    ips = (f"198.51.100.{i}" for i in range(1, 250))  # apart from the per-IP RULES

    def form(data):
        return post_form(client(next(ips)), "/login", data).status_code

    def as_json(data):
        return client(next(ips)).post("/login", json.dumps(data), content_type="application/json").status_code

    for email in ("alice@example.com", " Alice@Example.COM", "ALICE@EXAMPLE.COM\n"):
        assert form({"email": email}) == 401
    assert form({"email": "alice@example.com"}) == 429
    assert as_json({"email": "Alice@example.com"}) == 429
    assert as_json({"email": "bob@example.com"}) == 401
    for _ in range(5):
        assert as_json({"user": "x"}) == 401
        assert form({"email": "   "}) == 401


def test_a_body_no_door_reads_counts_the_client(settings_override):
    """identity:FIELD reads the body as every door does: one over 64 KiB or
    multipart is not read (whatever email it holds), so the client's
    address is counted instead, never a fresh email per request."""
    c = client("198.51.100.250")
    large = [json.dumps({"email": f"p{i}@example.com", "pad": " " * 70 * 1024}) for i in range(3)]
    assert [c.post("/login", body, content_type="application/json").status_code for body in large] == [401] * 3
    assert c.post("/login", {"email": "p4@example.com"}).status_code == 429  # multipart: the client again
    assert post_form(client("198.51.100.251"), "/login", {"email": "p4@example.com"}).status_code == 401


@pytest.mark.ruby
def test_a_header_key_is_its_bytes_and_a_named_scope_is_shared_with_ruby(settings_override, redis_url):
    """A Django PATHS entry with scope "api" and a Ruby limiter with scope "api"
    count one quota for the key clé (UTF-8 on the wire), as a Rails throttle
    named "api" would."""
    import subprocess

    prefix = unique_prefix()
    config = dict(settings_override, STORE=redis_url, PREFIX=prefix,
                  PATHS=[{"path": "/api/", "rules": "3/minute", "key": "header:X-Api-Key", "scope": "api"}])
    with override_settings(RATEKEEPER=config):
        c = Client(REMOTE_ADDR="203.0.113.20")
        # WSGI and ASGI hand Django a header's bytes decoded as Latin-1
        wire = "clé".encode().decode("latin-1")
        assert c.post("/api/items", HTTP_X_API_KEY=wire).status_code != 429
    ruby = subprocess.run(
        ["ruby", "-e", "require 'ratekeeper'; l = Ratekeeper::Limiter.new('3/minute', store: ARGV[0], prefix: ARGV[1], "
                       "scope: 'api'); puts l.peek('clé').remaining", redis_url, prefix],
        capture_output=True, text=True, timeout=60,
    )
    assert ruby.returncode == 0, ruby.stderr
    assert ruby.stdout.strip() == "2", "Ruby did not see the request Django counted"


@pytest.mark.parametrize("store_name", ["redis", "cluster", "redis-module", "cluster-module"])
def test_hostile_header_keys_are_limited_exactly(store_name, redis_url):
    """An X-Api-Key that is not UTF-8, or holds NUL or CR/LF, or runs to 4 KB,
    is limited exactly (3/minute on POST /api/) on every Redis path, the
    first check of a fresh store included."""
    from django.conf import settings

    from test_hostile import DOOR_KEYS, door_store

    for key in DOOR_KEYS:
        config = dict(settings.RATEKEEPER, STORE=door_store(store_name, redis_url), PREFIX=unique_prefix())
        with override_settings(RATEKEEPER=config):
            c = client()
            got = [c.post("/api/items", HTTP_X_API_KEY=key.decode("latin-1")).status_code for _ in range(5)]
        assert got == [200, 200, 200, 429, 429], f"{store_name}: {key[:8]!r}"


def test_an_ipv6_client_is_its_64():
    """KEY "user_or_ip": 10 requests from 10 addresses of one /64 are one
    client (5/second: 5 pass); another /64 is another client; an
    IPv4-mapped address is its IPv4 address; IPV6_PREFIX changes it."""
    got = [client(f"2001:db8:1:2::{i:x}").get("/").status_code for i in range(1, 11)]
    assert got == [200] * 5 + [429] * 5
    assert client("2001:db8:1:3::1").get("/").status_code == 200
    for _ in range(5):
        client("203.0.113.77").get("/")
    assert client("::ffff:203.0.113.77").get("/").status_code == 429
    from django.conf import settings

    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, PREFIX=unique_prefix(), IPV6_PREFIX=128)):
        assert {client(f"2001:db8:9::{i:x}").get("/").status_code for i in range(1, 11)} == {200}
    with override_settings(RATEKEEPER=dict(settings.RATEKEEPER, IPV6_PREFIX=40)):
        errors = [e for e in run_checks() if e.id.startswith("ratekeeper.")]
        assert any("RATEKEEPER['IPV6_PREFIX']" in e.msg and "give 48 to 128" in e.msg for e in errors), errors
