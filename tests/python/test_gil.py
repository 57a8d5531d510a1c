"""The GIL is released while the core waits on Redis: with Redis frozen
(SIGSTOP), four threads wait inside check() at the same time while the main
thread keeps running Python code, and their waits overlap."""

import os
import signal
import threading
import time

from ratekeeper import Limiter


def test_threads_wait_on_a_frozen_redis_without_the_gil(own_redis):
    port, pid = own_redis
    timeout = 1.0
    limiter = Limiter("1000/second", f"redis://127.0.0.1:{port}/0", timeout=timeout, connect_timeout=timeout, on_error="allow")
    for _ in range(3):
        assert limiter.check("warm").allowed and not limiter.check("warm").degraded
    os.kill(pid, signal.SIGSTOP)
    results = []
    threads = [threading.Thread(target=lambda: results.append(limiter.check("k"))) for _ in range(4)]
    start = time.monotonic()
    for t in threads:
        t.start()
    spins = 0
    while time.monotonic() - start < 0.5:
        spins += 1
    all_waiting = all(t.is_alive() for t in threads)
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    os.kill(pid, signal.SIGCONT)

    assert all_waiting, "the threads should still be waiting on the frozen Redis half a second in"
    assert spins > 10_000, f"the main thread ran only {spins} loop turns while the others waited"
    assert len(results) == 4 and all(d.allowed and d.degraded for d in results)
    # four waits of `timeout` one after the other would take 4 s
    assert elapsed < 3.5, f"waits did not overlap: {elapsed:.2f} s"
    # and once Redis is back (and the circuit breaker's back-off is over),
    # checks are answered by it again
    deadline = time.monotonic() + 10
    while limiter.check("after").degraded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not limiter.check("after").degraded
