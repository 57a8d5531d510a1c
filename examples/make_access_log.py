"""Writes examples/access.log: one day of a small shop's nginx log, in the
combined log format, from a fixed seed (the same file every time).

    python examples/make_access_log.py                                  # examples/access.log
    python examples/make_access_log.py --scale 200 --out /tmp/big.log   # ~1,000,000 lines

Who is in it (times of day in the shop's zone, UTC+1):

- 1,000 visitors: one short session each (a few come back once), mostly in
  the daytime; the first page of a session brings up to four assets within
  a second or so, later pages come from the cache;
- 3 heavy users, logged in (the authuser field names them): many long sessions;
- an office: a dozen colleagues behind one NAT address, in office hours;
- a partner's stock poller, logged in: one call a minute from 07:00 to 13:00;
- one scraper walking the product pages every 0.2 to 0.5 s for six minutes;
- one truncated line (cut by a log rotation), which the analysis counts as bad.

``--scale N`` multiplies everyone but the scraper by N.
"""

import argparse
import datetime
import itertools
import os
import random
from typing import Iterator, List, Tuple

SEED = 20240305
DAY = datetime.datetime(2024, 3, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
SITE = "https://shop.example"
BROWSERS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_3) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.3 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:123.0) Gecko/20100101 Firefox/123.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
]
PAGES = ["/", "/products", "/search?q=lamp", "/search?q=chair", "/cart", "/account", "/about"]
ASSETS = ["/static/app.js", "/static/app.css", "/static/logo.svg", "/static/fonts/inter.woff2"]
NAMES = ["alice", "bob", "carol"]
VISITORS, HEAVY = 1000, 3

Event = Tuple[float, str]  # (seconds after midnight, the log line)


def addresses(rng: random.Random, count: int) -> List[str]:
    """``count`` distinct client addresses from the documentation ranges
    (RFC 5737 for IPv4, then RFC 3849's 2001:db8::/32 for IPv6)."""
    pool = [f"{net}.{host}" for net in ("192.0.2", "198.51.100", "203.0.113") for host in range(1, 255)]
    more = (f"2001:db8:{a:x}::{b:x}" for a in range(1, 0x10000) for b in range(1, 0x100))
    pool += itertools.islice(more, max(0, count - len(pool)))
    return rng.sample(pool, count)


def line(ip: str, user: str, at: float, path: str, status: int, size: int, referer: str, agent: str) -> Event:
    """One GET request, in the combined log format."""
    stamp = (DAY + datetime.timedelta(seconds=at)).strftime("%d/%b/%Y:%H:%M:%S %z")
    return at, f'{ip} - {user} [{stamp}] "GET {path} HTTP/1.1" {status} {size} "{referer}" "{agent}"'


def page_view(rng: random.Random, ip: str, user: str, at: float, agent: str, assets: int) -> Iterator[Event]:
    """A page, then ``assets`` assets the browser fetches right after it."""
    page = rng.choice(PAGES + [f"/products/{rng.randint(1, 400)}"] * 4)
    status = 404 if rng.random() < 0.02 else 200
    yield line(ip, user, at, page, status, rng.randint(4000, 40000), SITE + "/", agent)
    for asset in rng.sample(ASSETS, assets):
        at += rng.uniform(0.05, 0.4)
        cached = rng.random() < 0.3
        size = 0 if cached else rng.randint(2000, 90000)
        yield line(ip, user, at, asset, 304 if cached else 200, size, SITE + page, agent)


def session(rng: random.Random, ip: str, user: str, start: float, views: int) -> Iterator[Event]:
    """``views`` page views by one browser, 3 to 60 seconds apart."""
    agent = rng.choice(BROWSERS)
    at = start
    for view in range(views):
        yield from page_view(rng, ip, user, at, agent, rng.randint(0, len(ASSETS)) if view == 0 else 0)
        at += rng.uniform(3, 60)


def daytime(rng: random.Random) -> float:
    """A start time (seconds after midnight), mostly in the day, busiest early in the afternoon."""
    return min(max(rng.gauss(14 * 3600, 3.5 * 3600), 0), 86000)


def visitors(rng: random.Random, ips: List[str]) -> Iterator[Event]:
    """Anonymous visitors: mostly one page, some a few more; a tenth come back later."""
    for ip in ips:
        for _ in range(2 if rng.random() < 0.1 else 1):
            yield from session(rng, ip, "-", daytime(rng), rng.choice([1, 1, 1, 2, 2, 3, 5]))


def heavy_users(rng: random.Random, ips: List[str]) -> Iterator[Event]:
    """Logged-in regulars: eight to twelve long sessions each."""
    for i, ip in enumerate(ips):
        name = NAMES[i % len(NAMES)] + ("" if i < len(NAMES) else str(i))
        for _ in range(rng.randint(8, 12)):
            yield from session(rng, ip, name, daytime(rng), rng.randint(4, 12))


def office(rng: random.Random, ip: str) -> Iterator[Event]:
    """A dozen colleagues behind one NAT address, in office hours."""
    for _ in range(12):
        for _ in range(rng.randint(2, 4)):
            yield from session(rng, ip, "-", rng.uniform(8.5 * 3600, 17.5 * 3600), rng.randint(2, 6))


def api_client(rng: random.Random, ip: str, name: str) -> Iterator[Event]:
    """A partner's stock poller: one call a minute from 07:00 to 13:00."""
    at = 7 * 3600 + rng.uniform(0, 60)
    while at < 13 * 3600:
        yield line(ip, name, at, "/api/stock?since=-60s", 200, rng.randint(200, 3000), "-", "stocksync/1.4")
        at += 60 + rng.uniform(-0.5, 0.5)


def scraper(rng: random.Random, ip: str) -> Iterator[Event]:
    """A crawler walking the product pages, 0.2 to 0.5 s apart, for six minutes."""
    at = 3 * 3600 + 17 * 60 + rng.uniform(0, 60)
    end = at + 6 * 60
    for product in itertools.count(1):
        if at >= end:
            break
        yield line(ip, "-", at, f"/products/{product}", 200, rng.randint(4000, 40000), "-", "python-requests/2.31.0")
        at += rng.uniform(0.2, 0.5)


def events(scale: int) -> List[Event]:
    """Every request of the day, in time order, with one line cut short in the afternoon."""
    rng = random.Random(SEED)
    ips = iter(addresses(rng, (VISITORS + HEAVY + 2) * scale + 1))
    found = list(visitors(rng, list(itertools.islice(ips, VISITORS * scale))))
    found += heavy_users(rng, list(itertools.islice(ips, HEAVY * scale)))
    for i in range(scale):
        found += office(rng, next(ips))
        found += api_client(rng, next(ips), "partner" + (str(i) if i else ""))
    found += scraper(rng, next(ips))
    found.sort()
    middle = len(found) * 2 // 3
    at, text = found[middle]
    found.insert(middle, (at, text[: text.index("]") - 12]))
    return found


def main() -> None:
    """Writes the log."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "access.log"))
    parser.add_argument("--scale", type=int, default=1, help="multiply everyone but the scraper by this")
    args = parser.parse_args()
    with open(args.out, "w") as out:
        out.writelines(text + "\n" for _, text in events(args.scale))


if __name__ == "__main__":
    main()
