"""The shared scenario table (tests/cases/scenarios.json) through the Python
API, blocking and awaited (`acheck`, `apeek`, `areset`), on every store."""

import asyncio
import json
import os

import pytest

import ratekeeper
from conftest import ROOT, unique_prefix

with open(os.path.join(ROOT, "tests", "cases", "scenarios.json")) as f:
    CASES = json.load(f)["cases"]


def test_the_table_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("api", ["blocking", "awaited"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_scenario(case, store, api):
    rules = case["rules"] if isinstance(case["rules"], str) else [tuple(r) for r in case["rules"]]
    limiter = ratekeeper.Limiter(rules, store, prefix=unique_prefix(), on_error="raise", timeout=5)
    asyncio.run(run_steps(case, limiter, api == "awaited"))
    stats = limiter.store_stats
    if store == os.environ.get("RATEKEEPER_TEST_REDIS_MODULE") or store == os.environ.get("RATEKEEPER_TEST_CLUSTER_MODULE"):
        assert (stats["path"], stats["script_calls"]) == ("module", 0), stats
        assert stats["module_calls"] > 0, stats
    elif store != "memory://":
        assert (stats["path"], stats["module_calls"]) == ("script", 0), stats


async def run_steps(case: dict, limiter: ratekeeper.Limiter, awaited: bool) -> None:
    """Runs a case's steps, each call blocking or awaited, checking each expectation."""
    for i, step in enumerate(case["steps"]):
        where = f"{case['name']} step {i}: {step}"
        if step["op"] == "reset":
            await limiter.areset(step["key"]) if awaited else limiter.reset(step["key"])
            continue
        if awaited:
            call = limiter.acheck if step["op"] == "check" else limiter.apeek
            d = await call(step["key"], step.get("cost", 1), now=step["now"])
        else:
            call = limiter.check if step["op"] == "check" else limiter.peek
            d = call(step["key"], step.get("cost", 1), now=step["now"])
        expect = step["expect"]
        if "allowed" in expect:
            assert d.allowed is expect["allowed"], where
            assert bool(d) is expect["allowed"], where
        if "retry_after" in expect:
            if expect["retry_after"] is None:
                assert d.retry_after is None, where
            else:
                assert d.retry_after == pytest.approx(expect["retry_after"], abs=1e-6), where
        if "remaining" in expect:
            assert [r.remaining for r in d.rules] == expect["remaining"], where
        if "reset_after" in expect:
            assert [r.reset_after for r in d.rules] == pytest.approx(expect["reset_after"], abs=1e-6), where
        if "limit" in expect:
            assert d.limit == expect["limit"], where
        if "binding" in expect:
            bound = d.rules[expect["binding"]]
            assert (d.limit, d.remaining, d.reset_after) == (bound.limit, bound.remaining, bound.reset_after), where
