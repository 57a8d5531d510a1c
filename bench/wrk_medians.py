"""Each mode's medians over the rounds of a wrk benchmark (bench/django_wrk,
bench/fastapi_wrk): reads WORK/wrk-MODE-ROUND.txt, wrk's --latency reports,
and prints one JSON line of the p50s, {"name": "PREFIX_MODE_p50", "p50_us":
median, "runs": [...]}, then, with --rps, one of the request rates.

    python3 bench/wrk_medians.py PREFIX MODE WORK [--rps]
"""

import glob
import json
import re
import statistics
import sys

SCALE = {"us": 1, "ms": 1e3, "s": 1e6}


def main(prefix, mode, work, rps=False):
    """Prints the medians of `mode`'s rounds in `work`."""
    p50s, rates = [], []
    for path in sorted(glob.glob(f"{work}/wrk-{mode}-*.txt")):
        with open(path) as f:
            text = f.read()
        value, unit = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)$", text, re.M).groups()
        p50s.append(float(value) * SCALE[unit])
        rates.append(float(re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M).group(1)))
    if not p50s:
        sys.exit(f"wrk_medians: no wrk report of {mode} in {work}")
    print(json.dumps({"name": f"{prefix}_{mode}_p50", "p50_us": statistics.median(p50s), "runs": p50s}))
    if rps:
        print(json.dumps({"name": f"{prefix}_{mode}_rps", "per_s": statistics.median(rates), "runs": rates}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], rps="--rps" in sys.argv[4:])
