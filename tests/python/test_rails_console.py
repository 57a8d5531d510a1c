"""Ratekeeper::Web, the operations console a Rails app mounts, driven in
headless Chromium: a Rails 6.1 app under puma (2 workers;
tests/ruby/servers/rails_console) on the test Redis, signed in through the
app's own form, mounts it behind its staff check. Listing, adding,
removing, extending, a key's card, the switches, who is limited after a
burst from one /24, a block made from it taking effect, the history naming
who did it; hostile text rendered inert; a POST without the CSRF token or
without staff rights changes nothing."""

import os
import re

import pytest

from browsing import (add, block_from_the_top, burst_from_one_network, burst_on_top, find, flash, listed, rows,
                      status_of, submit, wait)
from conftest import ROOT, unique_prefix
from ratekeeper import Admin, Limiter

APP = os.path.join(ROOT, "tests", "ruby", "servers", "rails_console", "config.ru")
HOSTILE_KEY = "user:<script>alert(1)</script>\r\nX-Injected: 1\u202egnp.exe"
HOSTILE_REASON = "<img src=x onerror=alert(2)> \u202e\r\n</td></tr><b>bold</b>"


@pytest.fixture
def rails(redis_url, tmp_path):
    """The console app under puma on a fresh prefix: (base URL, Admin on its store, prefix)."""
    from edge import puma_rack, stop_all

    prefix = unique_prefix()
    process, port = puma_rack(tmp_path, "console", redis_url, prefix, probe="/health", app=APP)
    try:
        yield f"http://127.0.0.1:{port}", Admin(redis_url, prefix=prefix), prefix
    finally:
        stop_all(process)


def sign_in(driver, live, name, password):
    driver.delete_all_cookies()
    driver.get(live + "/login")
    find(driver, "input[name=name]").send_keys(name)
    find(driver, "input[name=password]").send_keys(password)
    submit(driver, find(driver, "#login"))


def session_cookie(driver):
    return "; ".join(f"{c['name']}={c['value']}" for c in driver.get_cookies())


def test_rails_console_in_a_browser(rails, browser, redis_url):
    live, admin, prefix = rails
    page = live + "/ratekeeper/"

    # anonymous and a signed-in non-staff user: the app's constraint refuses them
    browser.get(page)
    assert not browser.find_elements("id", "entries")
    sign_in(browser, live, "guest", "pw")
    browser.get(page)
    assert not browser.find_elements("id", "entries")
    assert status_of(page + "add", {"list": "block", "target": "user:1"}, Cookie=session_cookie(browser)) == 404

    # staff sign in through the app's form
    sign_in(browser, live, "ops", "s3cret")
    browser.get(page)
    assert find(browser, "#no-entries") and find(browser, "#actor").text == "ops"
    # a POST with the staff session but without the form's CSRF token changes nothing
    assert status_of(page + "add", {"list": "block", "target": "user:1"}, Cookie=session_cookie(browser)) == 403
    assert listed(admin) == {}

    # block an address for an hour: listed with reason, time left and expiry in the app's zone
    add(browser, live, "block", "203.0.113.7", ttl="3600", reason="scanner")
    assert browser.current_url == page
    assert "Added 203.0.113.7/32 to the blocklist" in flash(browser)
    entry = rows(browser)[("blocklist", "203.0.113.7/32")]
    assert entry["reason"] == "scanner" and 3500 < entry["seconds"] <= 3600
    assert re.fullmatch(r"(59m \d+s|1h 0m)", entry["left"]), entry
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d C[SD]T", entry["expires"]), entry  # America/Chicago
    add(browser, live, "block", "user:9", ttl="60")
    add(browser, live, "safelist", "192.0.2.0/24", ttl="600", reason="office")
    assert set(rows(browser)) == {("blocklist", "203.0.113.7/32"), ("blocklist", "user:9"),
                                  ("safelist", "192.0.2.0/24")}
    assert set(listed(admin)) == set(rows(browser))
    limiter = Limiter("100/second", redis_url, prefix=prefix)
    assert not limiter.check("anyone", ip="203.0.113.7").allowed and not limiter.check("user:9").allowed
    # the app's own middleware refuses the address (controls_refresh 1 s)
    wait(browser).until(lambda _: status_of(live + "/", **{"X-Forwarded-For": "203.0.113.7"}) == 403)
    assert status_of(live + "/", **{"X-Forwarded-For": "203.0.113.8"}) == 200

    # remove and extend with their buttons
    submit(browser, find(browser, 'tr.entry[data-target="203.0.113.7/32"] button.remove-button'))
    assert "Removed 203.0.113.7/32 from the blocklist" in flash(browser)
    submit(browser, find(browser, 'tr.entry[data-target="user:9"] button.extend-button'))
    assert "Extended user:9 on the blocklist for 7d 0h" in flash(browser)
    assert rows(browser)[("blocklist", "user:9")]["left"] == "6d 23h"
    assert set(listed(admin)) == {("blocklist", "user:9"), ("safelist", "192.0.2.0/24")}

    # a key's card: its usage per scope after two requests, its block; set its tier
    for _ in range(2):
        assert status_of(live + "/api/x", **{"X-Forwarded-For": "203.0.113.40"}) == 200
    find(browser, "#lookup-key").send_keys("203.0.113.40")
    submit(browser, find(browser, "#lookup-button"))
    assert find(browser, "#key").text == "203.0.113.40"
    used = [(r.get_attribute("data-scope"), r.find_element("css selector", ".used").text)
            for r in browser.find_elements("css selector", "#usage tr.usage")]
    assert used == [("req/ip", "2")], used
    find(browser, "#set-tier input[name=value]").send_keys("pro")
    submit(browser, find(browser, "#set-tier button"))
    assert find(browser, "#tier").text == "pro" and "Set 203.0.113.40's tier" in flash(browser)
    browser.get(live + "/ratekeeper/key?key=user%3A9")
    assert find(browser, "#blocklist").text.startswith("until ")

    # hostile text in a key and a reason renders as text: no script runs, no markup is made
    admin.block(HOSTILE_KEY, reason=HOSTILE_REASON, key=True)
    browser.get(page)
    hostile = find(browser, "#entries").find_elements("css selector", "tr.entry")
    # (HTML reads CR LF in an attribute as LF)
    assert HOSTILE_KEY.replace("\r\n", "\n") in [r.get_attribute("data-target") for r in hostile]
    assert not browser.find_elements("css selector", "#entries b, #entries img, #history img")
    assert "<img src=x" in find(browser, "#entries").text
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text

    # who is limited now: a burst from one /24 on top, blocked in one click, for every worker
    denied = burst_from_one_network(live)
    top = burst_on_top(browser, page, denied)
    block_from_the_top(browser, live, top, "ops")

    # the history: who did what, newest first
    change = find(browser, "#history tr.change")
    assert (change.get_attribute("data-action"), change.get_attribute("data-target")) == ("block", "198.51.100.0/24")
    assert change.find_element("css selector", ".actor").text == "ops"
    assert change.find_element("css selector", ".reason").text.startswith("denied ")

    # the switches change only once confirmed (after the burst: a worker holds shadow mode
    # until its next policy read, and its shadowed denials are counted but answered 200)
    browser.get(page)
    from selenium.webdriver.support.ui import Select

    Select(find(browser, "#switches-form select[name=shadow]")).select_by_value("on")
    submit(browser, find(browser, "#switches-button"))
    assert find(browser, 'tr.switch[data-switch="shadow"] .after').text == "true"
    assert admin.switches()["shadow"] is False
    submit(browser, find(browser, "#confirm-button"))
    assert "Switches are now" in flash(browser) and find(browser, "#shadow").text == "on"
    assert admin.switches()["shadow"] is True
    admin.set_switches(shadow=False)
    by_ops = [(c["action"], c["target"]) for c in admin.history(20) if c["actor"] == "ops"]
    assert by_ops == [("switches", ""), ("block", "198.51.100.0/24"), ("tier", "203.0.113.40"),
                      ("block", "user:9"), ("unblock", "203.0.113.7/32"), ("safelist", "192.0.2.0/24"),
                      ("block", "user:9"), ("block", "203.0.113.7/32")], by_ops
