"""Reservations from Python: a check for an estimate, settled to what the
work cost, on every store; as a context manager, sync and async; each
settle one round trip."""

import asyncio

import pytest
import redis

import ratekeeper
from conftest import unique_prefix
from ratekeeper import ConfigurationError, Limiter, RateLimitExceeded

T = 1_800_000_000.0


def test_a_settle_gives_back_what_was_not_used_and_charges_an_overrun(store):
    limiter = Limiter("100/minute; 1000/hour", store, prefix=unique_prefix())
    first = limiter.reserve("tokens", 60, now=T)
    assert first.allowed and first.estimate == 60 and not first.settled
    assert first.decision.remaining == 40
    refused = limiter.reserve("tokens", 50, now=T + 1)
    assert not refused.allowed
    assert refused.settle(0, now=T + 1) is None and refused.refunded == 0, "a refusal settles to nothing"

    after = first.settle(10, now=T + 2)
    assert (first.refunded, first.over, first.settled) == (50, 0, True)
    assert [r.remaining for r in after.rules] == [90, 990]
    with pytest.raises(ConfigurationError, match="settles once"):
        first.settle(10)

    second = limiter.reserve("tokens", 50, now=T + 3)
    assert second.allowed, "the units given back admit it"
    after = second.settle(120, now=T + 4)
    assert (second.refunded, second.over) == (0, 70)
    assert after.allowed and after.remaining == 0, "an overrun is counted, never refused"
    assert not limiter.check("tokens", now=T + 5).allowed

    cancelled = limiter.reserve("other", 30, now=T)
    assert cancelled.cancel().remaining == 100 and cancelled.refunded == 30
    even = limiter.reserve("other", 5, now=T)
    assert even.settle(5) is None and (even.over, even.refunded) == (0, 0)


def test_the_context_manager_raises_on_refusal_and_keeps_an_unsettled_estimate():
    limiter = Limiter("10/minute")
    with limiter.reserve("k", 8, now=T) as r:
        assert r.allowed
    assert limiter.peek("k", now=T).remaining == 2, "never settled, it keeps its estimate"
    with pytest.raises(RateLimitExceeded) as raised:
        with limiter.reserve("k", 5, now=T):
            pytest.fail("a refused reservation runs no work")
    assert not raised.value.decision.allowed and "reservation of 5" in str(raised.value)
    with limiter.reserve("k", 2, now=T) as r:
        r.settle(0, now=T)
    assert limiter.peek("k", now=T).remaining == 2


def test_async_reservations_settle_on_the_loop(store):
    async def run():
        limiter = Limiter("100/minute", store, prefix=unique_prefix())
        async with await limiter.areserve("k", 40, now=T) as r:
            decision = await r.asettle(15, now=T + 1)
        assert decision.remaining == 85 and r.refunded == 25
        gone = await limiter.areserve("k", 10, now=T + 2)
        assert (await gone.acancel()).remaining == 85
        return True

    assert asyncio.run(run())


def test_bad_settles_are_named():
    limiter = Limiter("10/minute")
    r = limiter.reserve("k", 3)
    with pytest.raises(ConfigurationError, match="0 or more"):
        r.settle(-1)
    with pytest.raises(TypeError, match="actual must be an int"):
        r.settle("7")
    with pytest.raises(TypeError, match="actual must be an int"):
        r.settle(True)
    assert not r.settled, "a refused argument settles nothing"
    r.settle(2**200)
    assert r.over == 2**64 - 1 - 3 and not limiter.peek("k").allowed, "an overrun past every limit is counted"


def test_a_reservation_and_its_settle_are_one_round_trip_each(own_redis):
    port, _ = own_redis
    url = f"redis://127.0.0.1:{port}/0"
    con = redis.Redis.from_url(url)
    limiter = Limiter("100/minute", url, prefix=unique_prefix(), redis_module="off")
    limiter.check("warm")  # the script loaded, the controls read

    def calls():
        stats = con.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))

    before = calls()
    r = limiter.reserve("k", 50)
    reserved = calls()
    r.settle(20)
    assert (reserved - before, calls() - reserved) == (1, 1)
    assert limiter.peek("k").remaining == 80


def test_hostile_keys_reserve_and_settle_as_any_key(store):
    limiter = Limiter("10/minute", store, prefix=unique_prefix())
    for key in (b"\xff\xfe", b"a\x00b", "line\r\nbreak", "café"):
        r = limiter.reserve(key, 6, now=T)
        assert r.allowed
        assert r.settle(1, now=T).remaining == 9
        assert limiter.peek(key, now=T).remaining == 9


def test_threads_settling_one_reservation_at_once_give_back_once(store):
    import threading

    limiter = Limiter("100/minute", store, prefix=unique_prefix())
    r = limiter.reserve("shared", 40, now=T)
    start = threading.Barrier(8)
    outcomes = []

    def settle():
        start.wait(timeout=10)
        try:
            outcomes.append(r.settle(0, now=T))
        except ConfigurationError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=settle) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads), "a settle hung"
    settled = [o for o in outcomes if not isinstance(o, ConfigurationError)]
    assert len(settled) == 1 and len(outcomes) == 8
    assert limiter.peek("shared", now=T).remaining == 100, "given back once, not eight times"
