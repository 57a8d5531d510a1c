"""Driving headless Chromium through chromedriver, for the tests of the
operations console (the Django page and Ratekeeper::Web): the `browser`
fixture (in conftest.py) and helpers that wait for pages and read their
tables. Needs Debian's chromium and chromium-driver and selenium from PyPI:
without them a browser test is skipped, except under CI (CI set), where it
fails."""

import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from typing import Iterator

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT = 15  # seconds an explicit wait may take before the test fails


def _missing():
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install selenium)")
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            missing.append(f"{path} (apt-get install {package})")
    return missing


def chromium() -> Iterator:
    """Headless Chromium through chromedriver (the `browser` fixture).
    Skipped when they or selenium are missing, but failed under CI, where
    they must be there."""
    missing = _missing()
    if missing:
        message = "the browser test needs " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: not skipping)")
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1024"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT)


def find(driver, css):
    """Waits for the element the CSS selector finds, and returns it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return wait(driver).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def submit(driver, button):
    """Clicks a submit button and waits until the next page has replaced this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    from selenium.common.exceptions import WebDriverException

    old = driver.find_element(By.TAG_NAME, "html")
    button.click()

    def replaced(_):
        # Chromium reports a replaced page's node as stale or as "not in the document"
        try:
            old.is_enabled()
            return False
        except WebDriverException:
            return True

    wait(driver).until(replaced)
    find(driver, "body")


def rows(driver):
    """The entries the page lists: {(kind, target): {reason, seconds, left, expires}}."""
    from selenium.webdriver.common.by import By

    table = find(driver, "#entries")
    found = {}
    for row in table.find_elements(By.CSS_SELECTOR, "tr.entry"):
        left = row.find_element(By.CSS_SELECTOR, "td.left")
        found[(row.get_attribute("data-kind"), row.get_attribute("data-target"))] = {
            "reason": row.find_element(By.CSS_SELECTOR, "td.reason").text,
            "seconds": int(left.get_attribute("data-seconds")),
            "left": left.text,
            "expires": row.find_element(By.CSS_SELECTOR, "td.expires").text,
        }
    return found


def add(driver, live, kind, target, ttl="", reason=""):
    """Fills in and submits the add form."""
    from selenium.webdriver.support.ui import Select

    if not driver.current_url.startswith(live + "/ratekeeper/"):
        driver.get(live + "/ratekeeper/")
    Select(find(driver, "select[name=list]")).select_by_value(kind)
    for name, value in (("target", target), ("ttl", ttl), ("reason", reason)):
        field = find(driver, f"input[name={name}]")
        field.clear()
        field.send_keys(value)
    submit(driver, find(driver, "#add-button"))


def flash(driver):
    return find(driver, "#messages").text


def status_of(url, form=None, **headers):
    """The HTTP status of a GET of the live server (a POST of `form`, a
    dict, when given), sent with these headers."""
    data = None if form is None else urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def listed(admin):
    return {(e["kind"], e["target"]): e for e in admin.entries() if e["kind"] in ("safelist", "blocklist")}


def burst_from_one_network(live):
    """Eight addresses of 198.51.100.0/24 to the live site (5/second), each
    until three of its requests are denied (40 at most: a busy machine that
    serves fewer than five a second spreads them over more seconds); the
    denials."""
    denied = 0
    for host in range(20, 28):
        mine = 0
        for _ in range(40):
            mine += status_of(live + "/", **{"X-Forwarded-For": f"198.51.100.{host}"}) == 429
            if mine == 3:
                break
        denied += mine
    assert denied >= 16, denied
    return denied


def burst_on_top(driver, page, denied):
    """Waits until the console at `page` shows the burst's network as the
    most denied, with all `denied` of its denials (each process's arrive
    within its policy refresh), and the chart and address rows with it;
    the network's row."""

    def on_top(driver):
        driver.get(page)
        networks = driver.find_elements("css selector", "#denied-network tr.denied-row")
        return (networks and networks[0].get_attribute("data-target") == "198.51.100.0/24"
                and int(networks[0].get_attribute("data-count")) == denied and networks[0])

    from selenium.common.exceptions import TimeoutException

    try:
        top = wait(driver).until(on_top)
    except TimeoutException:
        seen = [(row.get_attribute("data-target"), row.get_attribute("data-count"))
                for row in driver.find_elements("css selector", "#denied-network tr.denied-row")]
        raise AssertionError(f"the burst's {denied} denials from 198.51.100.0/24 never topped the console: {seen}")
    bars = driver.find_elements("css selector", "#chart rect")
    assert len(bars) in (5, 6) and any(float(b.get_attribute("height")) > 0 for b in bars)
    assert driver.find_elements("css selector", '#denied-address tr.denied-row[data-target="198.51.100.20"]')
    return top


def block_from_the_top(driver, live, top, operator):
    """Clicks Block on the burst's row: the network is refused (others
    not), and the history's newest change says `operator` blocked it."""
    submit(driver, top.find_element("css selector", "button.block-button"))
    assert "Added 198.51.100.0/24 to the blocklist" in flash(driver)
    wait(driver).until(lambda _: status_of(live + "/", **{"X-Forwarded-For": "198.51.100.99"}) == 403)
    assert status_of(live + "/", **{"X-Forwarded-For": "203.0.113.50"}) == 200
    change = find(driver, "#history tr.change")
    assert (change.get_attribute("data-action"), change.get_attribute("data-target")) == ("block", "198.51.100.0/24")
    assert change.find_element("css selector", ".actor").text == operator
    assert change.find_element("css selector", ".reason").text.startswith("denied ")
