"""A staff-only page listing the safelist and blocklist, with their time left
and reason, where staff add and remove entries; who is limited now (the
most denied networks, addresses and keys over the last 5 or 60 minutes,
with a chart of the denials per minute, each row one click from a block or
a safelist, a key's also from its card); and the history of the changes operators made (who, when, what
and why: the store's audit trail, where this page records its changes as
the signed-in user's).

    # urls.py
    path("ratekeeper/", include("ratekeeper.django.urls"))

It works on the store and prefix of ``settings.RATEKEEPER`` through
``ratekeeper.Admin``. Staff log in through the admin site (``admin:login``),
and messages go through ``django.contrib.messages``, so the project needs
``django.contrib.admin`` (its URLs), ``django.contrib.messages`` and a
DjangoTemplates engine with ``APP_DIRS``. The views protect themselves
against CSRF, with or without ``CsrfViewMiddleware``.
"""

import functools
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_POST

from ratekeeper._ratekeeper import CONSOLE_CSP, CONSOLE_STYLE, Admin, ConfigurationError, StorageError
from ratekeeper.cli.admin import time_left
from ratekeeper.django.conf import get_config

TEMPLATE = "ratekeeper/policies.html"
LISTS = {"block": "blocklist", "safelist": "safelist"}
LISTINGS = ("safelist", "blocklist")


HISTORY = 50
"""The changes the page shows, newest first."""
WINDOWS = {"5m": 300, "60m": 3600}
"""The windows the page shows who is limited over."""
CHART = (360, 60)
"""The denials-per-minute chart's width and height, in pixels."""


HEADERS = {"X-Frame-Options": "DENY", "Content-Security-Policy": CONSOLE_CSP, "X-Content-Type-Options": "nosniff",
           "Cache-Control": "no-store"}
"""The headers of every response of the console, whatever the project's
middleware sends (Ratekeeper::Web sends the same): never framed, no script,
nothing loaded, posted only to itself, never cached."""


def _guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """`view` with the console's HEADERS on each of its responses (its
    pages, redirects and refusals, the login redirect included)."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        for name, value in HEADERS.items():
            response[name] = value
        return response

    return guarded


def _admin(request: HttpRequest) -> Admin:
    """A ratekeeper.Admin on the store and prefix of settings.RATEKEEPER, its
    changes recorded as the signed-in user's."""
    config = get_config()
    assert config.gate is not None
    return config.gate.admin(actor=request.user.get_username())


def _render(request: HttpRequest, template: str, context: Dict[str, Any], status: int = 200) -> HttpResponse:
    """A page of the console: `template` with `context` and the style sheet
    both consoles share (the core's)."""
    return render(request, template, {**context, "console_style": CONSOLE_STYLE}, status=status)


def _chart(per_minute: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The bars of the denials-per-minute chart (an inline SVG): each
    minute's x, y, width, height and title."""
    width, height = CHART
    peak = max([m["count"] for m in per_minute] + [1])
    step = width / max(len(per_minute), 1)
    bars = []
    for i, minute in enumerate(per_minute):
        tall = round(height * minute["count"] / peak, 1)
        when = datetime.fromtimestamp(minute["at"], tz=timezone.utc).strftime("%H:%M UTC")
        bars.append({"x": round(i * step, 1), "y": round(height - tall, 1), "width": max(round(step - 1, 1), 1),
                     "height": tall, "title": f"{when}: {minute['count']} denied"})
    return {"width": width, "height": height, "bars": bars, "peak": peak}


def _history(changes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The changes with their time as a datetime."""
    return [dict(change, when=datetime.fromtimestamp(change["at"], tz=timezone.utc)) for change in changes]


def _rows(entries: List[Dict[str, Any]], now: float) -> List[Dict[str, Any]]:
    """The entries with what the page shows of their expiry: seconds and time left, expiry as a datetime."""
    rows = []
    for entry in entries:
        row = dict(entry)
        expires_at = entry.get("expires_at")
        if expires_at is not None:
            left = max(0.0, expires_at - now)
            row["seconds_left"] = int(left)
            row["left"] = time_left(left)
            row["expires"] = datetime.fromtimestamp(expires_at, tz=timezone.utc)
        rows.append(row)
    return rows


def _when(epoch: Optional[float]) -> Optional[datetime]:
    """Epoch seconds as an aware time (the templates show it in the site's zone)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=timezone.utc)


def _card_query(tag: Optional[str]) -> str:
    """The query of a key's card, the key named by its stored form ("" for no key)."""
    return urlencode({"key": tag, "tag": "1"}) if tag else ""


def _page(request: HttpRequest, form: Optional[Dict[str, str]] = None, errors: Optional[List[str]] = None, status: int = 200) -> HttpResponse:
    """The page: entries from the store, the add form (as posted when it had errors), errors and messages."""
    errors = list(errors or [])
    listings: List[Dict[str, Any]] = []
    others: List[Dict[str, Any]] = []
    history: List[Dict[str, Any]] = []
    window = request.GET.get("window", "5m")
    window = window if window in WINDOWS else "5m"
    top: Dict[str, Any] = {"keys": [], "addresses": [], "networks": [], "per_minute": []}
    switches: Dict[str, Any] = {}
    try:
        admin = _admin(request)
        entries = admin.entries()
        history = _history(admin.history(HISTORY))
        top = admin.top_denied(WINDOWS[window])
        switches = admin.switches()
    except StorageError as exc:
        errors.append(f"The store could not be read: {exc}")
        status = 503
    else:
        rows = _rows(entries, time.time())
        listings = sorted((r for r in rows if r["kind"] in LISTINGS), key=lambda r: (r["kind"], r["target"]))
        others = sorted((r for r in rows if r["kind"] not in LISTINGS), key=lambda r: (r["kind"], r["target"]))
    context = {
        "listings": listings,
        "others": others,
        "history": history,
        "switches": switches,
        "top": top,
        # a key's row acts on its stored form (the very key, hashed or not UTF-8), shown as its text
        "denied_tables": [
            (title, [dict(row, target=row[column], card=_card_query(row.get("tag"))) for row in top[rows]], column)
            for title, column, rows in (("Network", "network", "networks"), ("Address", "address", "addresses"),
                                        ("Key", "key", "keys"))
        ],
        "acts": [("block", "Block"), ("safelist", "Safelist")],
        "chart": _chart(top["per_minute"]),
        "window": window,
        "windows": list(WINDOWS),
        "errors": errors,
        "form": form or {"list": "block", "target": "", "ttl": "", "reason": ""},
        "flash": list(messages.get_messages(request)),
    }
    return _render(request, TEMPLATE, context, status)


@_guarded
@staff_member_required
@csrf_protect
@require_GET
def policies(request: HttpRequest) -> HttpResponse:
    """The list of safelist and blocklist entries (tiers and overrides read-only), with the add form."""
    return _page(request)


@_guarded
@staff_member_required
@csrf_protect
@require_POST
def add_entry(request: HttpRequest) -> HttpResponse:
    """Blocks or safelists the posted target for the posted ttl (seconds; blank: one week)
    with the posted reason, then redirects to the list. Bad input is shown on the page."""
    form = {name: request.POST.get(name, "").strip() for name in ("list", "target", "ttl", "reason")}
    as_key = request.POST.get("key") == "1"  # an exact key, even one that reads as an address
    as_tag = request.POST.get("tag") == "1"  # a key's stored form, from the denied table or the entries
    errors = []
    ttl: Optional[float] = None
    if form["list"] not in LISTS:
        errors.append("Choose block or safelist.")
    if not form["target"]:
        errors.append("Give a target: a key (user:42), an IP address or a CIDR range (10.0.0.0/8).")
    if form["ttl"]:
        try:
            ttl = float(form["ttl"])
        except ValueError:
            errors.append(f"invalid ttl {form['ttl']!r}: give seconds, or leave it blank for one week")
    if not errors:
        admin = _admin(request)
        action = admin.block if form["list"] == "block" else admin.safelist
        try:
            entry = action(form["target"], ttl=ttl, reason=form["reason"], key=as_key, tag=as_tag)
        except ConfigurationError as exc:
            errors.append(str(exc))
        except StorageError as exc:
            return _page(request, form, [f"The store could not be written: {exc}"], status=503)
        else:
            left = time_left(entry["expires_at"] - time.time())
            messages.success(request, f"Added {entry['target']} to the {entry['kind']} for {left}.")
            return HttpResponseRedirect(reverse("ratekeeper:policies"))
    return _page(request, form, errors, status=400)


@_guarded
@staff_member_required
@csrf_protect
@require_POST
def remove_entry(request: HttpRequest) -> HttpResponse:
    """Removes the posted target from the posted list (kind safelist or blocklist; a key's ban
    in the posted scope; tag=1: a key's stored form), then redirects to the list."""
    kind = request.POST.get("kind", "")
    target = request.POST.get("target", "")
    scope = request.POST.get("scope") or None
    as_tag = request.POST.get("tag") == "1"
    if kind not in LISTINGS or not target:
        return _page(request, errors=["Nothing to remove: give kind (safelist or blocklist) and target."], status=400)
    admin = _admin(request)
    try:
        if kind == "safelist":
            removed = admin.unsafelist(target, tag=as_tag)
        else:  # an entry of a scope is a key's ban
            removed = admin.unblock(target, key=scope is not None, scope=scope, tag=as_tag)
    except ConfigurationError as exc:
        return _page(request, errors=[str(exc)], status=400)
    except StorageError as exc:
        return _page(request, errors=[f"The store could not be written: {exc}"], status=503)
    where = f" in scope {scope}" if scope else ""
    if removed:
        messages.success(request, f"Removed {target} from the {kind}{where}.")
    else:
        messages.warning(request, f"{target} was not on the {kind}{where} (it may have expired).")
    return HttpResponseRedirect(reverse("ratekeeper:policies"))


WEEK = 7 * 86400


@_guarded
@staff_member_required
@csrf_protect
@require_POST
def extend_entry(request: HttpRequest) -> HttpResponse:
    """Extends the posted entry (kind, target, scope; tag=1: a key's stored
    form) by the posted ttl (seconds; blank: one week) from now, keeping its reason."""
    kind = request.POST.get("kind", "")
    target = request.POST.get("target", "")
    scope = request.POST.get("scope") or None
    raw_ttl = request.POST.get("ttl", "").strip()
    if kind not in LISTINGS or not target:
        return _page(request, errors=["Nothing to extend: give kind (safelist or blocklist) and target."], status=400)
    try:
        ttl = float(raw_ttl) if raw_ttl else float(WEEK)
    except ValueError:
        return _page(request, errors=[f"invalid ttl {raw_ttl!r}: give seconds, or leave it blank for one week"],
                     status=400)
    admin = _admin(request)
    reason = request.POST.get("reason", "")
    as_tag = request.POST.get("tag") == "1"
    try:
        if kind == "safelist":
            entry = admin.safelist(target, ttl=ttl, reason=reason, key=request.POST.get("key") == "1", tag=as_tag)
        else:
            entry = admin.block(target, ttl=ttl, reason=reason, key=scope is not None or request.POST.get("key") == "1",
                                scope=scope, tag=as_tag)
    except ConfigurationError as exc:
        return _page(request, errors=[str(exc)], status=400)
    except StorageError as exc:
        return _page(request, errors=[f"The store could not be written: {exc}"], status=503)
    messages.success(request, f"Extended {entry['target']} on the {entry['kind']} for {time_left(ttl)}.")
    return HttpResponseRedirect(reverse("ratekeeper:policies"))


SWITCHES = ("enabled", "shadow")


@_guarded
@staff_member_required
@csrf_protect
@require_POST
def set_switches(request: HttpRequest) -> HttpResponse:
    """Changes the global switches posted (enabled, shadow: "on" or "off";
    multiplier: a number): first a confirmation page saying what will
    change, then, posted again with confirm=yes, the change."""
    change: Dict[str, Any] = {}
    errors: List[str] = []
    for name in SWITCHES:
        value = request.POST.get(name, "")
        if value in ("on", "off"):
            change[name] = value == "on"
        elif value:
            errors.append(f"{name} is on or off, not {value!r}")
    raw = request.POST.get("multiplier", "").strip()
    if raw:
        try:
            change["multiplier"] = float(raw)
        except ValueError:
            errors.append(f"invalid multiplier {raw!r}: give a number above 0")
    if errors or not change:
        return _page(request, errors=errors or ["Nothing to change: choose a switch."], status=400)
    reason = request.POST.get("reason", "").strip()
    if request.POST.get("confirm") != "yes":
        context = {"change": change, "reason": reason, "current": _admin(request).switches()}
        return _render(request, "ratekeeper/confirm_switches.html", context)
    try:
        switches = _admin(request).set_switches(**change, reason=reason)
    except ConfigurationError as exc:
        return _page(request, errors=[str(exc)], status=400)
    except StorageError as exc:
        return _page(request, errors=[f"The store could not be written: {exc}"], status=503)
    shown = ", ".join(f"{k}={v}" for k, v in switches.items())
    messages.success(request, f"Switches are now {shown}.")
    return HttpResponseRedirect(reverse("ratekeeper:policies"))


def _usage(admin: Admin, key: str, tag: bool) -> List[Dict[str, Any]]:
    """The key's usage per rule in each scope the settings' throttles (and
    the decorators') keep (each meter's of a throttle with meters), whatever
    its listings (nothing logged); `tag`: the key named by its stored form."""
    usage = []
    for scope, rules in sorted(get_config().throttle_rules().items()):
        decision = admin.usage(key, rules, scope=scope, tag=tag)
        usage.append({"scope": scope, "rules": [
            {"rule": f"{r.limit}/{r.window:g}s", "used": r.used, "remaining": r.remaining,
             "reset_after": round(r.reset_after, 1)} for r in decision.rules]})
    return usage


@_guarded
@staff_member_required
@csrf_protect
def key_card(request: HttpRequest) -> HttpResponse:
    """A key's card (GET ?key=, with tag=1 a key's stored form as the
    denied table links it, and scope= a limiter's scope to show its leases
    in): its usage per rule in each scope, its listings and bans, tier and
    override, and the leases it holds; a POST sets or clears its tier
    (action tier) or override (action override), or releases a lease
    (action release_lease, with lease_id and scope), then shows the card."""
    given = request.POST if request.method == "POST" else request.GET
    key = given.get("key", "") or ""
    tag = given.get("tag") == "1"
    lease_scope = (given.get("scope", "") or "").strip()
    if not key:
        return _page(request, errors=["Give a key to look up."], status=400)
    admin = _admin(request)
    errors: List[str] = []
    if request.method == "POST" and request.POST.get("action") == "release_lease":
        lease_id = request.POST.get("lease_id", "")
        try:
            released = admin.release_lease(key, lease_id, scope=lease_scope, reason=request.POST.get("reason", ""))
        except ConfigurationError as exc:
            errors.append(str(exc))
        except StorageError as exc:
            errors.append(f"The store could not be written: {exc}")
        else:
            if released:
                messages.success(request, f"Released lease {lease_id} of {key}.")
            else:
                errors.append(f"{key} holds no lease {lease_id} (it lapsed, or was released).")
        if not errors:
            query = {"key": key, **({"scope": lease_scope} if lease_scope else {})}
            return HttpResponseRedirect(f"{reverse('ratekeeper:key')}?{urlencode(query)}")
    elif request.method == "POST" and tag:
        errors.append("A key named by its stored form takes no tier or override here: set them by the key itself.")
    elif request.method == "POST":
        action = request.POST.get("action")
        value = request.POST.get("value", "").strip() or None
        reason = request.POST.get("reason", "")
        try:
            if action == "tier":
                admin.set_tier(key, value, reason=reason)
            elif action == "override":
                admin.set_override(key, value, reason=reason)
            else:
                errors.append("Choose a tier or an override to set.")
        except ConfigurationError as exc:
            errors.append(str(exc))
        except StorageError as exc:
            errors.append(f"The store could not be written: {exc}")
        if not errors:
            what = "tier" if action == "tier" else "override"
            messages.success(request, f"{'Set' if value else 'Cleared'} {key}'s {what}.")
            return HttpResponseRedirect(f"{reverse('ratekeeper:key')}?{urlencode({'key': key})}")
    scopes = sorted(get_config().limiters())
    try:
        seen = admin.inspect(key, tag=tag)
        in_scopes = [admin.inspect(key, scope=scope, tag=tag) for scope in scopes]
        bans = [(scope, s["scope_blocklist"]) for scope, s in zip(scopes, in_scopes)]
        held = [(s["scope"] or "", lease) for s in [seen, *in_scopes] for lease in s["leases"]]
        if lease_scope and lease_scope not in scopes:
            held += [(lease_scope, lease) for lease in admin.inspect(key, scope=lease_scope, tag=tag)["leases"]]
        leases = [(scope, dict(lease, since=_when(lease["since"]), lapse_at=_when(lease["lapse_at"])))
                  for scope, lease in held]
        usage = _usage(admin, key, tag)
    except ConfigurationError as exc:
        return _page(request, errors=[str(exc)], status=400)
    except StorageError as exc:
        return _page(request, errors=[f"The store could not be read: {exc}"], status=503)
    context = {"key": key, "tag": tag, "seen": seen, "bans": [(s, b) for s, b in bans if b], "usage": usage,
               "leases": leases, "lease_scope": lease_scope,
               "errors": errors, "flash": list(messages.get_messages(request)),
               "actions": [("tier", "Tier", "pro"), ("override", "Override", "100/minute; 5000/day")]}
    return _render(request, "ratekeeper/key.html", context, 400 if errors else 200)
