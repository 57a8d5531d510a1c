"""The GIL is released while the core waits on Redis: with Redis frozen
(SIGSTOP), four threads wait inside check() at the same time while the main
thread keeps running Python code, and their waits overlap. And signals the
process takes meanwhile fail none of those waits."""

import os
import signal
import subprocess
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


def test_signals_taken_while_checks_wait_on_redis_fail_none(redis_url, prefix):
    """A signal that lands on a thread blocked in a Redis read used to end the
    read with EINTR, and the check with a storage error that on_error
    admitted (up to 1,307 of these 20,000 checks): a handler of the app's own,
    or a child's SIGCHLD, failed checks open. Two processes send SIGUSR1 as
    fast as they can (30,000 each at most, stopped when the checks end) while
    four threads make 20,000 checks. (The timeout is 2 s: an interrupted
    read fails at once whatever it is, while the default 250 ms ran out on
    a machine that the senders and the suite's other workers kept busy.)"""
    limiter = Limiter("1000000/second", redis_url, prefix=prefix, on_error="allow", timeout=2.0)
    taken = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: taken.append(1))
    send = f"for i in $(seq 30000); do kill -USR1 {os.getpid()} 2>/dev/null || exit 0; done"
    senders = [subprocess.Popen(["bash", "-c", send], start_new_session=True) for _ in range(2)]
    degraded = []
    try:
        def checks(t):
            degraded.append(sum(limiter.check(f"k{t}-{i % 50}").degraded for i in range(5000)))

        threads = [threading.Thread(target=checks, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "the checks did not end within 120 s"
    finally:
        for sender in senders:
            sender.terminate()
            sender.wait(timeout=20)
        signal.signal(signal.SIGUSR1, previous)
    assert sum(degraded) == 0, f"{sum(degraded)} checks failed while the process took signals"
    assert limiter.error_count == 0
    assert taken, "no signal arrived during the checks: the test proved nothing"

