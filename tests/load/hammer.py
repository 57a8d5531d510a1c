"""A load worker: hammers keys from threads with two limiters (a long and a
short window) until a deadline, then prints every admitted check as JSON
lines: {"rule": "long"|"short", "key": ..., "now": server time}.

    python3 hammer.py URL PREFIX SECONDS THREADS KEY [KEY ...]
"""

import json
import sys
import threading
import time

import ratekeeper


def main() -> None:
    url, prefix, seconds, threads = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    keys = sys.argv[5:]
    limiters = {
        "long": ratekeeper.Limiter("40/hour", url, prefix=prefix + "-long", on_error="raise", timeout=5),
        "short": ratekeeper.Limiter("25/second", url, prefix=prefix + "-short", on_error="raise", timeout=5),
    }
    admitted = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def work(offset: int) -> None:
        i = offset
        mine = []
        while time.monotonic() < deadline:
            key = keys[i % len(keys)]
            for name, limiter in limiters.items():
                d = limiter.check(key)
                if d:
                    mine.append({"rule": name, "key": key, "now": d.now})
            i += 1
        with lock:
            admitted.extend(mine)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for record in admitted:
        print(json.dumps(record))


if __name__ == "__main__":
    main()
