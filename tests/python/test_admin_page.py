"""The staff page of the safelist and blocklist (ratekeeper.django.urls) in
the example project, driven in headless Chromium over a live server on the
test Redis: login required, add, list with reason and time left, remove,
bad input shown on the page. A few checks through Django's test client
cover CSRF and an unreachable store.

The browser (browsing.py) needs Debian's chromium and chromium-driver and
selenium from PyPI: without them it is skipped, except under CI."""

import re
import threading
import time
from html import unescape
from typing import Dict, List

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from django.test import Client, override_settings
from django.test.testcases import LiveServerThread, _StaticFilesHandler

from ratekeeper import CONSOLE_CSP, Admin, Limiter
from browsing import (add, block_from_the_top, burst_from_one_network, burst_on_top, find, flash, listed, rows,
                      status_of, submit, wait)
from conftest import unique_prefix

FAST_HASHER = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module", autouse=True)
def database():
    call_command("migrate", verbosity=0, run_syncdb=True)


@pytest.fixture
def config(redis_url):
    """The example's settings on a fresh prefix. The staff pages (and the admin's
    static files, which this project does not serve) are exempt, so that a quick
    browser does not run into the example's 5/second."""
    raw = dict(
        settings.RATEKEEPER,
        STORE=redis_url,
        PREFIX=unique_prefix(),
        EXEMPT_PATHS=list(settings.RATEKEEPER.get("EXEMPT_PATHS", [])) + ["/ratekeeper/", "/admin/", "/static/"],
    )
    with override_settings(RATEKEEPER=raw, PASSWORD_HASHERS=FAST_HASHER):
        yield raw


@pytest.fixture
def admin(config):
    """A ratekeeper.Admin on the same store and prefix as the page."""
    return Admin(config["STORE"], prefix=config["PREFIX"])


def make_user(staff: bool, password: str = "pw") -> User:
    name = ("staff-" if staff else "user-") + unique_prefix()
    return User.objects.create_user(name, password=password, is_staff=staff)


@pytest.fixture
def live_server(config):
    """The example project on a free loopback port, sharing the in-memory
    database with this thread (as Django's LiveServerTestCase does)."""
    shared = {c.alias: c for c in connections.all() if c.vendor == "sqlite" and c.is_in_memory_db()}
    for conn in shared.values():
        conn.inc_thread_sharing()
    server = LiveServerThread("127.0.0.1", _StaticFilesHandler, connections_override=shared, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    try:
        if server.error:
            raise server.error
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.terminate()
        server.join(timeout=10)
        # a connection the browser kept alive ends in its own thread, which then
        # closes the shared database: let those threads finish first
        for thread in threading.enumerate():
            if "process_request_thread" in thread.name:
                thread.join(timeout=10)
        for conn in shared.values():
            conn.dec_thread_sharing()


# -- the browser test --------------------------------------------------------


def test_staff_page_in_a_browser(live_server, browser, admin, config):
    # (the browser, set up after the server, quits before it stops)
    live = live_server
    page = live + "/ratekeeper/"

    # anonymous: sent to the admin login, the page's entries never shown
    browser.get(page)
    wait(browser).until(lambda d: "/admin/login/" in d.current_url)
    assert "next=/ratekeeper/" in browser.current_url
    assert not browser.find_elements("id", "entries")

    # logged in but not staff (the session cookie of a non-staff user): refused too
    outsider = Client()
    outsider.force_login(make_user(staff=False))
    browser.add_cookie({"name": settings.SESSION_COOKIE_NAME, "value": outsider.cookies[settings.SESSION_COOKIE_NAME].value, "path": "/"})
    browser.get(page)
    wait(browser).until(lambda d: "/admin/login/" in d.current_url)
    assert not browser.find_elements("id", "entries")
    browser.delete_all_cookies()

    # staff log in through the admin login form and land on the page
    staff = make_user(staff=True, password="s3cret")
    browser.get(live + "/admin/login/?next=/ratekeeper/")
    find(browser, "input[name=username]").send_keys(staff.username)
    find(browser, "input[name=password]").send_keys("s3cret")
    submit(browser, find(browser, "[type=submit]"))
    wait(browser).until(lambda d: d.current_url == page)
    assert find(browser, "#no-entries")

    # block an address for an hour, with a reason: listed with reason and time left
    add(browser, live, "block", "203.0.113.7", ttl="3600", reason="scanner")
    assert browser.current_url == page  # redirected after the POST
    assert "203.0.113.7/32" in flash(browser) and "blocklist" in flash(browser)
    entry = rows(browser)[("blocklist", "203.0.113.7/32")]
    assert entry["reason"] == "scanner"
    assert 3500 < entry["seconds"] <= 3600
    assert re.fullmatch(r"(59m \d+s|1h 0m)", entry["left"]), entry
    # the site's time zone (the example keeps Django's default, America/Chicago), named
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d C[SD]T", entry["expires"]), entry

    # block a key with the default ttl (one week), and safelist a range
    add(browser, live, "block", "user:9")
    add(browser, live, "safelist", "198.51.100.0/24", ttl="600", reason="office")
    shown = rows(browser)
    assert shown[("blocklist", "user:9")]["left"] == "6d 23h"
    assert shown[("blocklist", "user:9")]["reason"] == ""
    assert shown[("safelist", "198.51.100.0/24")]["reason"] == "office"
    assert set(shown) == {("blocklist", "203.0.113.7/32"), ("blocklist", "user:9"), ("safelist", "198.51.100.0/24")}

    # the store has them, and a limiter on it honours them
    stored = listed(admin)
    assert set(stored) == set(shown)
    assert stored[("blocklist", "203.0.113.7/32")]["detail"] == "scanner"
    assert abs(stored[("blocklist", "203.0.113.7/32")]["expires_at"] - (time.time() + 3600)) < 60
    limiter = Limiter("100/second", config["STORE"], prefix=config["PREFIX"])
    assert not limiter.check("anyone", ip="203.0.113.7").allowed
    assert not limiter.check("user:9").allowed
    assert limiter.check("anyone", ip="203.0.113.8").allowed
    if hasattr(Limiter, "screen"):
        # the middleware screens client addresses (a core that has Limiter.screen):
        # the demo site refuses 203.0.113.7 (X-Forwarded-For through the trusted 127.0.0.1)
        wait(browser).until(lambda _: status_of(live + "/", **{"X-Forwarded-For": "203.0.113.7"}) == 403)
        assert status_of(live + "/", **{"X-Forwarded-For": "203.0.113.8"}) == 200

    # remove the address with its button: gone from the page and the store
    button = find(browser, 'tr.entry[data-kind="blocklist"][data-target="203.0.113.7/32"] button.remove-button')
    submit(browser, button)
    assert browser.current_url == page
    assert "Removed 203.0.113.7/32 from the blocklist" in flash(browser)
    assert set(rows(browser)) == {("blocklist", "user:9"), ("safelist", "198.51.100.0/24")}
    assert set(listed(admin)) == {("blocklist", "user:9"), ("safelist", "198.51.100.0/24")}

    # the history: each change, newest first, made by the signed-in staff user, with its reason
    changes = [(row.get_attribute("data-action"), row.get_attribute("data-target"),
                row.find_element("css selector", ".actor").text, row.find_element("css selector", ".reason").text)
               for row in browser.find_elements("css selector", "#history tr.change")]
    assert changes == [
        ("unblock", "203.0.113.7/32", staff.username, ""),
        ("safelist", "198.51.100.0/24", staff.username, "office"),
        ("block", "user:9", staff.username, ""),
        ("block", "203.0.113.7/32", staff.username, "scanner"),
    ], changes
    assert [c["actor"] for c in admin.history()] == [staff.username] * 4

    # a bad target: the store's message on the page, the form kept, nothing added
    add(browser, live, "block", "10.0.0.0/99", reason="typo")
    errors = find(browser, "#errors").text
    assert "10.0.0.0/99" in errors and "prefix length" in errors, errors
    assert "Server Error" not in browser.page_source
    assert find(browser, "input[name=target]").get_attribute("value") == "10.0.0.0/99"
    assert set(rows(browser)) == {("blocklist", "user:9"), ("safelist", "198.51.100.0/24")}

    # a bad ttl too
    add(browser, live, "safelist", "user:10", ttl="-5")
    assert "ttl" in find(browser, "#errors").text
    assert set(listed(admin)) == {("blocklist", "user:9"), ("safelist", "198.51.100.0/24")}


# -- without a browser -------------------------------------------------------


@pytest.fixture
def staff_client(config):
    client = Client()
    client.force_login(make_user(staff=True))
    return client


def test_posts_need_the_csrf_token(config, admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(staff=True))
    assert client.post("/ratekeeper/add", {"list": "block", "target": "user:1"}).status_code == 403
    page = client.get("/ratekeeper/")
    assert page.status_code == 200
    token = client.cookies[settings.CSRF_COOKIE_NAME].value
    done = client.post("/ratekeeper/add", {"list": "block", "target": "user:1", "csrfmiddlewaretoken": token})
    assert done.status_code == 302 and done["Location"] == "/ratekeeper/"
    assert ("blocklist", "user:1") in listed(admin)


def test_non_staff_are_sent_to_login(config, admin):
    client = Client()
    client.force_login(make_user(staff=False))
    for response in (client.get("/ratekeeper/"), client.post("/ratekeeper/add", {"list": "block", "target": "user:2"})):
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert listed(admin) == {}


def test_remove_of_a_missing_entry_and_wrong_methods(staff_client):
    response = staff_client.post("/ratekeeper/remove", {"kind": "blocklist", "target": "user:404"}, follow=True)
    assert response.status_code == 200
    assert b"user:404 was not on the blocklist" in response.content
    assert staff_client.post("/ratekeeper/remove", {"kind": "tier", "target": "user:404"}).status_code == 400
    assert staff_client.get("/ratekeeper/add").status_code == 405
    assert staff_client.post("/ratekeeper/").status_code == 405


def test_an_unreachable_store_is_a_message_not_a_500(config):
    # port 1 on the loopback: nothing listens there, the connection is refused
    with override_settings(RATEKEEPER=dict(config, STORE="redis://127.0.0.1:1/0")):
        client = Client()
        client.force_login(make_user(staff=True))
        page = client.get("/ratekeeper/")
        assert page.status_code == 503 and b"The store could not be read" in page.content
        added = client.post("/ratekeeper/add", {"list": "block", "target": "user:3"})
        assert added.status_code == 503 and b"The store could not be written" in added.content


def test_expiry_is_shown_in_the_sites_time_zone_and_says_which(staff_client, admin):
    import re
    from datetime import datetime
    from zoneinfo import ZoneInfo

    entry = admin.block("user:tz", ttl=3600)
    with override_settings(TIME_ZONE="America/New_York"):
        page = staff_client.get("/ratekeeper/").content.decode()
    shown = re.search(r'<td class="expires"><time datetime="[^"]*">([^<]*)</time>', page).group(1)
    local = datetime.fromtimestamp(entry["expires_at"], ZoneInfo("America/New_York"))
    assert shown == local.strftime("%Y-%m-%d %H:%M:%S ") + local.tzname(), shown
    assert "UTC" not in shown


def test_the_history_shows_who_changed_what_and_renders_hostile_text_inert(staff_client, config):
    """Changes made elsewhere (a script's Admin, another operator) are in the
    page's history with their actor; a key, reason or actor with markup,
    CR/LF or bidi controls is shown as text."""
    hostile = '<script>alert(1)</script>\r\n\u202e"'
    Admin(config["STORE"], prefix=config["PREFIX"], actor=f"mallory{hostile}").block(
        f"user:{hostile}", ttl=60, reason=f"why {hostile}", key=True)
    Admin(config["STORE"], prefix=config["PREFIX"], actor="ops-bob").set_tier("user:1", "pro", reason="paid")
    page = staff_client.get("/ratekeeper/").content.decode()
    history = page[page.index('<table id="history">'):]
    history = history[:history.index("</table>")]
    assert "<script>" not in history and "&lt;script&gt;alert(1)&lt;/script&gt;" in history
    assert history.index("ops-bob") < history.index("mallory"), "newest first"
    assert 'data-action="tier"' in history and "paid" in history


def test_a_ban_in_a_scope_is_shown_with_it_and_removed_by_it(staff_client, admin):
    """A key banned in one scope (penalize in a login limiter) is listed with
    its scope, and its Remove button lifts that ban, not the key's own."""
    admin.block("user:7", ttl=600, reason="fail2ban logins", key=True, scope="login")
    admin.block("user:7", ttl=600, reason="chargeback")
    page = staff_client.get("/ratekeeper/").content.decode()
    assert 'data-scope="login"' in page and "(in scope <code>login</code> only)" in page
    assert '<input type="hidden" name="scope" value="login">' in page
    done = staff_client.post("/ratekeeper/remove", {"kind": "blocklist", "target": "user:7", "scope": "login"},
                             follow=True)
    assert b"Removed user:7 from the blocklist in scope login" in done.content
    assert [(e["kind"], e["scope"]) for e in admin.entries() if e["target"] == "user:7"] == [("blocklist", None)]


def test_who_is_limited_now_in_a_browser(live_server, browser, config):
    """A burst from one /24 through the example site's middleware is the
    top row of the page's denied networks within the policy refresh; its
    Block button blocks the network (its requests get 403, others not), the
    chart shows the minute's denials, and the history says who did it."""
    live = live_server
    staff = make_user(staff=True)
    session = Client()
    session.force_login(staff)
    browser.get(live + "/health")
    browser.add_cookie({"name": settings.SESSION_COOKIE_NAME, "value": session.cookies[settings.SESSION_COOKIE_NAME].value,
                        "path": "/"})
    denied = burst_from_one_network(live)
    top = burst_on_top(browser, live + "/ratekeeper/", denied)
    block_from_the_top(browser, live, top, staff.username)


def test_extend_the_switches_with_a_confirmation_and_a_keys_card(staff_client, admin, config):
    """Extend keeps an entry's reason and pushes its expiry a week out; the
    switches change only once confirmed; a key's card shows its usage per
    scope, its listings and bans, and sets and clears its tier and override."""
    admin.block("user:5", ttl=60, reason="slow down", key=True)
    done = staff_client.post("/ratekeeper/extend", {"kind": "blocklist", "target": "user:5", "reason": "slow down",
                                                    "key": "1"}, follow=True)
    assert b"Extended user:5 on the blocklist for 7d 0h" in done.content
    (entry,) = [e for e in admin.entries() if e["target"] == "user:5"]
    assert entry["detail"] == "slow down" and entry["expires_at"] - time.time() > 6 * 86400

    asked = staff_client.post("/ratekeeper/switches", {"shadow": "on", "multiplier": "2", "reason": "load test"})
    assert asked.status_code == 200 and b'id="confirm-button"' in asked.content
    assert admin.switches()["shadow"] is False, "nothing changes before the confirmation"
    page = asked.content.decode()
    assert 'name="shadow" value="on"' in page and 'name="confirm" value="yes"' in page
    done = staff_client.post("/ratekeeper/switches", {"shadow": "on", "multiplier": "2", "reason": "load test",
                                                      "confirm": "yes"}, follow=True)
    assert b"Switches are now" in done.content
    assert admin.switches() == {"enabled": True, "shadow": True, "multiplier": 2.0}
    assert staff_client.post("/ratekeeper/switches", {"shadow": "maybe"}).status_code == 400
    staff_client.post("/ratekeeper/switches", {"shadow": "off", "multiplier": "1", "confirm": "yes"})

    Limiter(config["RULES"], config["STORE"], prefix=config["PREFIX"], scope="default").check("user:6")
    admin.block("user:6", ttl=600, reason="fail2ban logins", key=True, scope="default")
    card = staff_client.get("/ratekeeper/key", {"key": "user:6"})
    page = card.content.decode()
    assert card.status_code == 200 and '<code id="key">user:6</code>' in page
    assert 'data-scope="default"' in page and "Banned in <code>default</code>" in page
    used = re.findall(r'<tr class="usage" data-scope="default">.*?<td class="used">(\d+)</td>', page)
    assert used and int(used[0]) >= 1, used
    done = staff_client.post("/ratekeeper/key", {"key": "user:6", "action": "tier", "value": "pro", "reason": "paid"},
                             follow=True)
    assert b"Set user:6&#x27;s tier" in done.content and b'<td id="tier">pro</td>' in done.content
    staff_client.post("/ratekeeper/key", {"key": "user:6", "action": "override", "value": "9/minute"})
    assert admin.inspect("user:6")["override"] == "9/1m"
    staff_client.post("/ratekeeper/key", {"key": "user:6", "action": "override", "value": ""})
    assert admin.inspect("user:6")["override"] is None
    bad = staff_client.post("/ratekeeper/key", {"key": "user:6", "action": "override", "value": "9/fortnight"})
    assert bad.status_code == 400 and b"fortnight" in bad.content
    hostile = staff_client.get("/ratekeeper/key", {"key": "<script>alert(1)</script>"}).content.decode()
    assert "<script>alert" not in hostile and "&lt;script&gt;" in hostile
    assert [c["action"] for c in admin.history(4)] == ["override", "override", "tier", "block"]


def test_a_keys_card_shows_its_leases_and_releases_one(staff_client, admin, config):
    """A job's limiter holds slots in the scope "export": the card shows them
    when asked for that scope, and an operator releases one (recorded)."""
    export = Limiter("2 concurrent", config["STORE"], prefix=config["PREFIX"], scope="export")
    stuck = export.hold("job:7")
    assert b"No lease is held." in staff_client.get("/ratekeeper/key", {"key": "job:7"}).content
    card = staff_client.get("/ratekeeper/key", {"key": "job:7", "scope": "export"}).content.decode()
    assert f'<td class="lease-id">{stuck.id}</td>' in card
    done = staff_client.post("/ratekeeper/key", {"key": "job:7", "action": "release_lease", "lease_id": stuck.id,
                                                 "scope": "export", "reason": "hung"})
    assert done.status_code == 302 and done["Location"].endswith("key=job%3A7&scope=export")
    assert f"Released lease {stuck.id} of job:7.".encode() in staff_client.get(done["Location"]).content
    assert export.leases("job:7") == []
    change = admin.history(1)[0]
    assert (change["action"], change["target"], change["scope"], change["detail"], change["reason"]) == (
        "release", "job:7", "export", stuck.id, "hung")
    again = staff_client.post("/ratekeeper/key", {"key": "job:7", "action": "release_lease", "lease_id": stuck.id,
                                                  "scope": "export"})
    assert again.status_code == 400 and b"holds no lease" in again.content


def test_the_new_forms_need_staff_and_the_csrf_token(config, admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(staff=True))
    for path, form in (("/ratekeeper/extend", {"kind": "blocklist", "target": "user:1"}),
                       ("/ratekeeper/switches", {"shadow": "on", "confirm": "yes"}),
                       ("/ratekeeper/key", {"key": "user:1", "action": "tier", "value": "pro"})):
        assert client.post(path, form).status_code == 403, path
    outsider = Client()
    outsider.force_login(make_user(staff=False))
    assert outsider.post("/ratekeeper/switches", {"shadow": "on", "confirm": "yes"}).status_code == 302
    assert outsider.get("/ratekeeper/key", {"key": "user:1"}).status_code == 302
    assert admin.switches()["shadow"] is False and admin.inspect("user:1")["tier"] is None


def test_every_console_response_is_unframeable_under_the_consoles_csp(config, admin):
    """Each page, POST answer, redirect and refusal of the console carries
    X-Frame-Options: DENY and the Content-Security-Policy Ratekeeper::Web
    sends (the core's CONSOLE_CSP), though the example project's middleware
    sends neither."""
    assert "django.middleware.clickjacking.XFrameOptionsMiddleware" not in settings.MIDDLEWARE
    staff = Client(enforce_csrf_checks=True)
    staff.force_login(make_user(staff=True))
    outsider = Client()
    outsider.force_login(make_user(staff=False))
    responses = {"refused, no CSRF token": staff.post("/ratekeeper/add", {"list": "block", "target": "user:5"}),
                 "the page": staff.get("/ratekeeper/"),
                 "the page over 60m": staff.get("/ratekeeper/", {"window": "60m"}),
                 "a key's card": staff.get("/ratekeeper/key", {"key": "user:5"}),
                 "no key": staff.get("/ratekeeper/key"),
                 "a wrong method": staff.get("/ratekeeper/add"),
                 "a non-staff GET": outsider.get("/ratekeeper/"),
                 "a non-staff POST": outsider.post("/ratekeeper/switches", {"shadow": "on"})}
    token = staff.cookies[settings.CSRF_COOKIE_NAME].value

    def post(path: str, **form: str):
        return staff.post(path, {**form, "csrfmiddlewaretoken": token})

    responses.update({
        "add": post("/ratekeeper/add", list="block", target="user:5", reason="drill"),
        "add, bad input": post("/ratekeeper/add", list="nope", target=""),
        "extend": post("/ratekeeper/extend", kind="blocklist", target="user:5"),
        "extend, bad input": post("/ratekeeper/extend", kind="tier", target="user:5"),
        "remove": post("/ratekeeper/remove", kind="blocklist", target="user:5"),
        "remove, bad input": post("/ratekeeper/remove", kind="tier", target="user:5"),
        "switches, to confirm": post("/ratekeeper/switches", shadow="on"),
        "switches, bad input": post("/ratekeeper/switches", shadow="maybe"),
        "switches, confirmed": post("/ratekeeper/switches", shadow="off", confirm="yes"),
        "a tier set on a card": post("/ratekeeper/key", key="user:5", action="tier", value="pro"),
        "a card's bad action": post("/ratekeeper/key", key="user:5", action="nope"),
    })
    assert {what: r.status_code for what, r in responses.items()} == {
        "refused, no CSRF token": 403, "the page": 200, "the page over 60m": 200, "a key's card": 200,
        "no key": 400, "a wrong method": 405, "a non-staff GET": 302, "a non-staff POST": 302, "add": 302,
        "add, bad input": 400, "extend": 302, "extend, bad input": 400, "remove": 302, "remove, bad input": 400,
        "switches, to confirm": 200, "switches, bad input": 400, "switches, confirmed": 302,
        "a tier set on a card": 302, "a card's bad action": 400}
    guard = {"X-Frame-Options": "DENY", "Content-Security-Policy": CONSOLE_CSP}
    unguarded = {what: {name: r.get(name) for name in guard} for what, r in responses.items()
                 if any(r.get(name) != value for name, value in guard.items())}
    assert unguarded == {}


# -- a denied key that is not its own text ------------------------------------

STORED_ONLY = ("k" * 200, "user:{42}", "tok\xff\xfe")
"""Keys the record of denials cannot show as themselves: over 128 bytes and
holding braces (kept as `#` and their SHA-1), and bytes that are not UTF-8
(the API key header as WSGI gives it: latin-1, so b"tok\\xff\\xfe")."""


def _forms(html: str, table: str, form_class: str) -> List[Dict[str, str]]:
    """The hidden fields of each `form_class` form in the table `table` of a page."""
    found = re.search(rf'<table[^>]* id="{table}">(.*?)</table>', html, re.S)
    assert found, f"no table {table}"
    forms = re.findall(rf'<form class="{form_class}"[^>]*>(.*?)</form>', found.group(1), re.S)
    return [{name: unescape(value) for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">',
                                                                 form)} for form in forms]


def _answers(client: Client) -> List[int]:
    """What the site answers a write to its API under each of the keys."""
    return [client.post("/api/", HTTP_X_API_KEY=key, REMOTE_ADDR=f"198.51.100.{i}").status_code
            for i, key in enumerate(STORED_ONLY)]


def test_a_denied_key_hashed_or_not_utf8_is_blocked_inspected_and_removed_from_its_row(config, admin):
    """Denied keys over 128 bytes, with braces, and not UTF-8 are rows of the
    page's denied keys; each row's Block (posted with the page's CSRF token)
    blocks that very key (403 where it was 429), its Inspect link shows the
    block on the key's card, and the Remove of the entry the block made lifts it."""
    raw = dict(config, CONTROLS_REFRESH=0.1, DENIAL_CACHE=0)
    with override_settings(RATEKEEPER=raw):
        site = Client()
        for _ in range(4):  # 3/minute per API key: the 4th is denied
            answers = _answers(site)
        assert answers == [429] * 3, answers
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len([k for k in admin.top_denied(60)["keys"]
                                                    if k["scope"] == "path:/api/"]) < 3:
            time.sleep(0.05)
        staff = Client(enforce_csrf_checks=True)
        staff.force_login(make_user(staff=True))
        page = staff.get("/ratekeeper/").content.decode()
        token = staff.cookies[settings.CSRF_COOKIE_NAME].value
        blocks = [form for form in _forms(page, "denied-key", "act")
                  if form["list"] == "block" and form["reason"].endswith("(path:/api/)")]
        assert len(blocks) == 3, blocks
        assert "tok\ufffd\ufffd" in page, "the key not UTF-8 is shown as text"
        for done, form in enumerate(blocks, 1):
            response = staff.post("/ratekeeper/add", dict(form, csrfmiddlewaretoken=token))
            assert response.status_code == 302, response.content
            answers = _answers(site)
            assert sorted(answers) == [403] * done + [429] * (3 - done), (form, answers)

        keys = re.search(r'<table class="denied" id="denied-key">(.*?)</table>', page, re.S).group(1)
        rows = re.findall(r'<tr class="denied-row"(.*?)</tr>', keys, re.S)
        links = [re.search(r'<a class="inspect" href="([^"]+)">Inspect</a>', row).group(1)
                 for row in rows if "<td>path:/api/</td>" in row]
        assert len(links) == 3
        for link in links:
            card = staff.get(unescape(link))
            assert card.status_code == 200
            assert re.search(r'<td id="blocklist">until [^<]+</td>', card.content.decode()), card.content

        page = staff.get("/ratekeeper/").content.decode()
        removes = _forms(page, "entries", "remove")
        removes = [form for form in removes if "reason" not in form]  # (not the Extend forms)
        assert len(removes) == 3, removes
        for form in removes:
            response = staff.post("/ratekeeper/remove", dict(form, csrfmiddlewaretoken=token), follow=True)
            assert b"Removed" in response.content, response.content
        assert _answers(site) == [429] * 3
        assert admin.entries() == []
