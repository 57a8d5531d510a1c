"""`ratekeeper analyze`: replaying logs with a known answer through the core."""

import datetime
import gzip
import importlib.util
import json
import os
import subprocess
import sys
from typing import List, Tuple

import pytest

from ratekeeper.cli import analyze
from ratekeeper.cli import main

DAY = 86400
T0 = 1709596800  # 2024-03-05T00:00:00Z
RULES = "2/second; 5/minute"
CANDIDATE = "3/second"

# (order, time, ip, authuser, zone): lines are written sorted by `order`, so a
# line whose time is before its order comes out of time order.
Event = Tuple[float, float, str, str, str]


def known_events() -> List[Event]:
    """Five users with a known fate, plus 995 who each make one request.

    | ip       | requests (seconds after T0)           | 1s peak | 1m peak | denied by RULES | by CANDIDATE |
    | 10.0.0.1 | 10, 10, 10                            | 3       | 3       | 1 (day 1)       | 0            |
    | 10.0.0.2 | 100, 101, 102, 103, 3605              | 1       | 4       | 0               | 0            |
    | 10.0.0.3 | 200..250 every 10 s; day 2: 200, 210  | 1       | 6       | 1 (day 1)       | 0            |
    | 10.0.0.4 | 300; day 2: 500 five times (at +0200) | 5       | 5       | 3 (day 2)       | 2 (day 2)    |
    | 10.0.0.6 | 400, 399; day 2: 0, -1 (at -0500)     | 1       | 2       | 0               | 0            |

    10.0.0.2's requests one second apart never share a 1 s window (it is
    half-open); 10.0.0.6's lines come a second out of order and are replayed
    in time order, so 399 and 400 never share a 1 s window either, and its
    23:59:59 line counts on day 1.
    """
    events: List[Event] = [(T0 + 10, T0 + 10, "10.0.0.1", "ann", "+0000")] * 3
    events += [(T0 + t, T0 + t, "10.0.0.2", "-", "+0000") for t in (100, 101, 102, 103, 3605)]
    events += [(T0 + t, T0 + t, "10.0.0.3", "-", "+0000") for t in range(200, 251, 10)]
    events += [(T0 + DAY + t, T0 + DAY + t, "10.0.0.3", "-", "+0000") for t in (200, 210)]
    events += [(T0 + 300, T0 + 300, "10.0.0.4", "dan", "+0000")]
    events += [(T0 + DAY + 500, T0 + DAY + 500, "10.0.0.4", "dan", "+0200")] * 5
    events += [(T0 + 400, T0 + 400, "10.0.0.6", "-", "+0000"), (T0 + 400.5, T0 + 399, "10.0.0.6", "-", "+0000")]
    events += [(T0 + DAY, T0 + DAY, "10.0.0.6", "-", "+0000"), (T0 + DAY + 0.5, T0 + DAY - 1, "10.0.0.6", "-", "-0500")]
    events += [(T0 + 1000 + 10 * i, T0 + 1000 + 10 * i, f"10.1.{i // 250}.{i % 250}", "-", "+0000") for i in range(995)]
    return sorted(events)


def clf_line(at: float, ip: str, user: str, zone: str) -> str:
    """A combined-format line for a request at epoch second ``at`` written in ``zone``."""
    offset = datetime.timedelta(hours=int(zone[:3]), minutes=int(zone[0] + zone[3:]))
    local = datetime.datetime.fromtimestamp(at, datetime.timezone(offset))
    stamp = local.strftime("%d/%b/%Y:%H:%M:%S %z")
    return f'{ip} - {user} [{stamp}] "GET /items?id=1 HTTP/1.1" 200 512 "-" "curl/8.5.0"\n'


BAD_LINES = [
    "this is not a log line\n",
    "10.9.9.9 - - [05/Mar/2024:00:0\n",
    '10.9.9.9 - - [05/Foo/2024:00:00:01 +0000] "GET / HTTP/1.1" 200 5\n',
    '10.9.9.9 - - [05/Mar/2024:25:00:01 +0000] "GET / HTTP/1.1" 200 5\n',
]


def known_log_text() -> str:
    """The known log, with the four bad lines spread through it (lines 2, 101, 501, 901)."""
    lines = [clf_line(at, ip, user, zone) for _, at, ip, user, zone in known_events()]
    for number, bad in zip((2, 101, 501, 901), BAD_LINES):
        lines.insert(number - 1, bad)
    return "".join(lines)


@pytest.fixture
def known_log(tmp_path) -> str:
    path = tmp_path / "access.log"
    path.write_text(known_log_text())
    return str(path)


def analyze_json(capsys, *argv: str) -> dict:
    """Runs `analyze --json` in-process and returns its report."""
    assert main(["analyze", *argv, "--json", "--no-progress"]) == 0
    return json.loads(capsys.readouterr().out)


def test_known_answer(known_log, capsys):
    report = analyze_json(capsys, known_log, "--rules", RULES, "--candidates", CANDIDATE)
    assert report["format"] == "clf" and report["gzip"] is False
    assert report["lines"] == 1021 + 4
    assert report["requests"] == 1021
    assert report["unkeyed_lines"] == 0
    assert report["users"] == 1000
    assert report["user_periods"] == 1003  # 995 + 10.0.0.1, .2 + two days each for .3, .4, .6
    assert report["first_time"] == "2024-03-05T00:00:10Z"
    assert report["last_time"] == "2024-03-06T00:08:20Z"
    current, candidate = report["candidates"]
    assert current["rules"] == "2/1s; 5/1m"
    assert (current["denied_requests"], current["users_affected"], current["user_periods_affected"]) == (5, 3, 3)
    assert current["users_affected_pct"] == 0.3
    assert current["user_periods_affected_pct"] == pytest.approx(100 * 3 / 1003, abs=1e-4)
    assert (candidate["denied_requests"], candidate["users_affected"], candidate["user_periods_affected"]) == (2, 1, 1)
    assert candidate["denied_requests_pct"] == pytest.approx(100 * 2 / 1021, abs=1e-4)

    # 1s peaks: 998 users at 1, then 3, 5; 1m peaks: 995 at 1, then 2, 3, 4, 5, 6.
    # Nearest rank of 1,000: p50 is the 500th, p99 the 990th, p99.9 the 999th.
    second, minute = report["windows"]
    assert second == {
        "window": "1s",
        "window_seconds": 1.0,
        "p50": 1,
        "p99": 1,
        "p99_9": 3,
        "max": 5,
        "suggested_limit": 9,
    }
    assert minute == {
        "window": "1m",
        "window_seconds": 60.0,
        "p50": 1,
        "p99": 1,
        "p99_9": 5,
        "max": 6,
        "suggested_limit": 15,
    }
    assert [w["limit"] for w in current["windows"]] == [2, 5]
    assert current["windows"][1]["p99_9"] == 5
    assert current["suggested_rules"] == "9/1s; 15/1m"
    assert candidate["suggested_rules"] == "9/1s"


def test_hours_count_user_periods_by_hour(known_log, capsys):
    report = analyze_json(capsys, known_log, "--rules", RULES, "--period", "hour")
    # 10.0.0.2 is seen in hours 0 and 1 of day 1, 10.0.0.6 in hour 0 and
    # (its 23:59:59 line, replayed in time order) hour 23 of day 1; the others as by day
    assert report["period"] == "hour"
    assert report["user_periods"] == 1005
    assert report["candidates"][0]["user_periods_affected"] == 3


def test_key_user_skips_lines_without_one(known_log, capsys):
    report = analyze_json(capsys, known_log, "--rules", RULES, "--key", "user")
    assert report["key"] == "user"
    assert (report["requests"], report["unkeyed_lines"], report["users"]) == (9, 1012, 2)
    assert report["candidates"][0]["denied_requests"] == 4  # ann 1, dan 3


def test_bad_lines_are_counted_with_examples(known_log, capsys):
    report = analyze_json(capsys, known_log, "--rules", RULES)
    assert report["bad_lines"] == 4
    examples = report["bad_line_examples"]
    assert [e["line"] for e in examples] == [2, 101, 501]
    assert examples[0] == {
        "line": 2,
        "reason": "not in common or combined log format",
        "text": "this is not a log line",
    }
    assert "bad date 05/Foo/2024" in examples[2]["reason"]


def test_text_report(known_log, capsys):
    assert main(["analyze", known_log, "--rules", RULES, "--candidates", CANDIDATE, "--no-progress"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "1,025 lines: 1,021 requests replayed, 0 without a key, 4 bad" in lines
    assert "line 2: not in common or combined log format: 'this is not a log line'" in lines
    assert "2/1s; 5/1m (--rules) 5 (0.5%) 3 (0.3%) 3 (0.3%)" in lines
    assert "3/1s 2 (0.2%) 1 (0.1%) 1 (0.1%)" in lines
    assert "1s 1 1 3 5 9" in lines
    assert "2/1s; 5/1m -> 9/1s; 15/1m" in lines


@pytest.mark.parametrize("name", ["access.log.gz", "access-without-suffix"])
def test_gzip_input(tmp_path, known_log, capsys, name):
    path = tmp_path / name
    path.write_bytes(gzip.compress(known_log_text().encode()))
    zipped = analyze_json(capsys, str(path), "--rules", RULES, "--candidates", CANDIDATE)
    plain = analyze_json(capsys, known_log, "--rules", RULES, "--candidates", CANDIDATE)
    assert zipped["gzip"] is True
    for field in ("lines", "requests", "users", "user_periods", "bad_lines", "windows", "candidates"):
        assert zipped[field] == plain[field], field


def test_json_lines_input(tmp_path, capsys):
    records = [
        {"ts": T0, "user": "u1", "path": "/"},
        {"timestamp": "2024-03-05T00:00:00.400Z", "user": "u1"},
        {"time": "2024-03-05T01:00:00.700+01:00", "user": "u1"},  # the same second as above, another zone
        {"ts": str(T0 + 5), "user": 42},
        {"time": "2024-03-05 00:00:06", "user": 42},  # no zone: UTC
        {"ts": T0 + 7, "user": None},  # anonymous: not limited
        {"ts": T0 + 8},  # no user field
        {"ts": "yesterday", "user": "u1"},
        {"user": "u1"},
        [1, 2],
    ]
    text = "\n".join(json.dumps(r) for r in records) + "\n{not json\n\n"
    path = tmp_path / "app.jsonl"
    path.write_text(text)
    report = analyze_json(capsys, str(path), "--rules", "2/second", "--key", "user")
    assert report["format"] == "json"
    assert (report["requests"], report["unkeyed_lines"], report["bad_lines"], report["users"]) == (5, 1, 5, 2)
    assert report["candidates"][0]["denied_requests"] == 1
    assert report["windows"][0]["max"] == 3
    assert [e["reason"] for e in report["bad_line_examples"]] == [
        "no 'user' field",
        "bad time 'yesterday'",
        "no 'time', 'timestamp' or 'ts' field",
    ]
    by_field = analyze_json(capsys, str(path), "--rules", "2/second", "--key", "path")
    assert (by_field["requests"], by_field["unkeyed_lines"]) == (1, 0)


def test_times_out_of_range_are_bad_lines(tmp_path, capsys):
    """A record whose time is NaN, infinite or outside 1970-2200 is a bad line,
    counted and shown, never a request that vanishes (json accepts NaN and
    Infinity as numbers)."""
    hostile = ["NaN", "Infinity", "-Infinity", "1e300", "-5", '"nan"', '"inf"', '"1e300"', '"2200-01-01T00:00:00Z"']
    lines = [f'{{"ts": {value}, "ip": "10.5.0.1"}}' for value in hostile]
    lines += [json.dumps({"ts": T0 + i, "ip": "10.5.0.2"}) for i in range(3)]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = analyze_json(capsys, str(path), "--rules", "2/second")
    assert (report["requests"], report["bad_lines"]) == (3, len(hostile))
    reasons = [e["reason"] for e in report["bad_line_examples"]]
    assert all("from 1970 up to 2200" in r for r in reasons), reasons
    assert report["lines"] == len(lines)


def test_plot_is_a_png(known_log, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "peaks.png"
    assert (
        main(["analyze", known_log, "--rules", RULES, "--candidates", CANDIDATE, "--plot", str(out), "--no-progress"])
        == 0
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_usage_error(known_log, tmp_path, monkeypatch, capsys):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else find_spec(name, *a)
    )
    assert main(["analyze", known_log, "--rules", RULES, "--plot", str(tmp_path / "p.png")]) == 2
    assert "pip install matplotlib" in capsys.readouterr().err


def test_percentile_is_nearest_rank():
    values = list(range(1, 1001))
    assert [analyze.percentile(values, n, d) for _, n, d in analyze.QUANTILES] == [500, 990, 999]
    assert analyze.percentile([7], 999, 1000) == 7
    assert analyze.percentile([], 1, 2) is None


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ratekeeper", *argv], capture_output=True, text=True, timeout=60)


def test_cli_success(known_log):
    result = run_cli("analyze", known_log, "--rules", RULES, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["candidates"][0]["denied_requests"] == 5
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_cli_bad_rules_exit_2_with_the_core_message(known_log):
    result = run_cli("analyze", known_log, "--rules", "5/fortnight")
    assert result.returncode == 2
    assert (
        "ratekeeper analyze: error: argument --rules: invalid rule '5/fortnight': unknown time unit 'fortnight'"
        in result.stderr
    )
    result = run_cli("analyze", known_log, "--rules", "1/s", "--candidates", "10/s;20/s")
    assert result.returncode == 2 and "same window" in result.stderr


def test_cli_missing_file_exits_1(tmp_path):
    missing = str(tmp_path / "nope.log")
    result = run_cli("analyze", missing, "--rules", "1/s")
    assert result.returncode == 1
    assert f"cannot read {missing}" in result.stderr and "No such file" in result.stderr


def test_cli_usage_errors_exit_2(known_log):
    assert run_cli().returncode == 2
    assert run_cli("analyze", known_log).returncode == 2  # --rules is required
    result = run_cli("analyze", known_log, "--rules", "1/s", "--key", "path")
    assert result.returncode == 2 and "only 'ip' and 'user'" in result.stderr


def test_example_log_is_reproducible(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "access.log"
    subprocess.run(
        [sys.executable, os.path.join(root, "examples", "make_access_log.py"), "--out", str(out)], check=True
    )
    with open(os.path.join(root, "examples", "access.log")) as committed:
        assert out.read_text() == committed.read()


def test_lines_out_of_order_are_replayed_in_time_order(tmp_path, capsys):
    """Workers write lines seconds out of order: the report is the one of the
    same log in time order (it was not: a line behind its user's newest
    counted at that newest time, inflating peaks and denials)."""
    import random

    rng = random.Random(7)
    events = []
    for user in range(200):
        at = T0 + rng.uniform(0, 600)
        for _ in range(rng.randint(1, 12)):
            at += rng.expovariate(4.0)
            events.append((at, f"10.2.{user // 250}.{user % 250}"))
    events.sort()
    in_order = tmp_path / "in-order.log"
    in_order.write_text("".join(clf_line(at, ip, "-", "+0000") for at, ip in events))
    # each line written up to 3 s late, as buffered workers do
    shuffled = sorted(events, key=lambda e: e[0] + rng.uniform(0, 3))
    assert shuffled != events
    disordered = tmp_path / "disordered.log"
    disordered.write_text("".join(clf_line(at, ip, "-", "+0000") for at, ip in shuffled))
    expected = analyze_json(capsys, str(in_order), "--rules", "2/second; 5/minute")
    got = analyze_json(capsys, str(disordered), "--rules", "2/second; 5/minute")
    assert got["late_lines"] == 0
    assert got["candidates"] == expected["candidates"] and got["windows"] == expected["windows"]
    assert expected["candidates"][0]["denied_requests"] > 0, "the log should exercise the rules"
    # a line further behind than the buffer holds is counted as late
    late = tmp_path / "late.log"
    late.write_text(clf_line(T0 + 500, "10.3.0.1", "-", "+0000") + clf_line(T0 + 10, "10.3.0.2", "-", "+0000"))
    assert analyze_json(capsys, str(late), "--rules", "2/second")["late_lines"] == 1


def test_the_format_is_chosen_by_the_first_lines_that_parse(tmp_path, capsys):
    records = [json.dumps({"time": T0 + i, "ip": f"10.4.0.{i}"}) for i in range(1, 6)]
    cut = tmp_path / "cut.jsonl"
    cut.write_text('me": 1709596800, "ip": "10.4.0.9"}\n' + "\n".join(records) + "\n")
    report = analyze_json(capsys, str(cut), "--rules", "2/second")
    assert report["format"] == "json" and report["requests"] == 5 and report["bad_lines"] == 1
    garbage = tmp_path / "garbage.log"
    garbage.write_text("nothing\nhere parses\n{not json either\n")
    done = run_cli("analyze", str(garbage), "--rules", "2/second")
    assert done.returncode == 1 and "no line of" in done.stderr, done.stderr


def test_plot_and_tier_rules_errors_are_usage_errors(known_log, tmp_path):
    for path in ("out.txt", "noext"):
        done = run_cli("analyze", known_log, "--rules", RULES, "--plot", str(tmp_path / path))
        assert done.returncode == 2 and "ending in .png" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert not list(tmp_path.glob(path + "*"))
    done = run_cli("inspect", "user:1", "--rules", "1/s", "--tier-rules", "pro", "--store", "redis://127.0.0.1:1/0")
    assert done.returncode == 2 and "NAME=RULES" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_hostile_lines_are_bad_lines_or_requests_never_a_crash(tmp_path, capsys):
    """Bytes that are not UTF-8, NUL, CR, lone surrogates, times past any
    float and nesting past any stack: each line is replayed or counted bad
    (these crashed the replay when it was written in Python)."""
    clf = clf_line(T0 + 1, "10.6.0.1", "-", "+0000").encode()
    lines = [
        clf,
        clf.replace(b"10.6.0.1", b"\xff\xfe"),  # a key that is not UTF-8: replaced, replayed
        clf.replace(b"10.6.0.1", b"a\x00b"),
        b"10.6.0.1 - - [05/Mar/2024:00:00:0\r",  # a lone CR ends a (cut) line
        clf.replace(b"05/Mar/2024", b"05/Mar/0000"),
        clf.replace(b"+0000", b"+2400"),
    ]
    path = tmp_path / "hostile.log"
    path.write_bytes(b"".join(lines))
    report = analyze_json(capsys, str(path), "--rules", "2/second")
    assert (report["lines"], report["requests"], report["bad_lines"], report["users"]) == (6, 3, 3, 3)
    reasons = [e["reason"] for e in report["bad_line_examples"]]
    assert reasons == [
        "not in common or combined log format",
        "bad date 05/Mar/0000 +0000: year 0 is out of range",
        "bad date 05/Mar/2024 +2400: offset must be a timedelta strictly between -timedelta(hours=24) and "
        "timedelta(hours=24), not datetime.timedelta(days=1).",
    ]
    records = [
        '{"ts": 1709596800, "ip": "\\ud800"}',  # a lone surrogate: replaced, replayed
        '{"ts": 1' + "0" * 400 + ', "ip": "a"}',
        "[" * 100_000 + "]" * 100_000,
        '{"ts": "2024-W10-2", "ip": "b"}',  # an ISO week date
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(records) + "\n")
    report = analyze_json(capsys, str(path), "--rules", "2/second")
    assert (report["requests"], report["bad_lines"]) == (2, 2)
    assert report["first_time"] == "2024-03-05T00:00:00Z" == report["last_time"]
    reasons = [e["reason"] for e in report["bad_line_examples"]]
    assert reasons == ["bad time 1" + "0" * 400 + ": give a time from 1970 up to 2200", "not valid JSON"]


def test_the_replay_reports_progress_and_stops_when_asked(tmp_path):
    """The core calls back every 4096 lines with the bytes read, the file's
    size and the lines read; an exception in the callback (as Ctrl-C raises)
    stops the replay and is raised."""
    from ratekeeper._ratekeeper import replay_log

    path = tmp_path / "access.log"
    path.write_text("".join(clf_line(T0 + i / 100, "10.7.0.1", "-", "+0000") for i in range(10_000)))
    calls = []
    replayed = replay_log(str(path), ["5/second"], "ip", 86400, lambda *args: calls.append(args))
    size = path.stat().st_size
    assert [lines for _, _, lines in calls] == [4096, 8192]
    assert all(total == size and 0 < done <= size for done, total, _ in calls)
    # 100 lines a second, 5 of them admitted
    assert replayed["requests"] == 10_000 and replayed["candidates"][0]["denied_requests"] == 9_500

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop()

    with pytest.raises(Stop):
        replay_log(str(path), ["5/second"], "ip", 86400, stop)


def test_a_gzip_of_several_members_is_read_whole(tmp_path, capsys):
    text = known_log_text()
    half = len(text) // 2
    cut = text.rindex("\n", 0, half) + 1
    path = tmp_path / "rotated.log.gz"
    path.write_bytes(gzip.compress(text[:cut].encode()) + gzip.compress(text[cut:].encode()))
    plain = tmp_path / "plain.log"
    plain.write_text(text)
    zipped = analyze_json(capsys, str(path), "--rules", RULES)
    assert zipped["lines"] == analyze_json(capsys, str(plain), "--rules", RULES)["lines"] == 1025


def test_ctrl_c_stops_a_long_replay_at_once(tmp_path):
    """SIGINT, as Ctrl-C sends it, while the core replays without the GIL:
    the command stops within the next 4,096 lines, exits 130, and prints no
    traceback."""
    import signal
    import time

    chunk = "".join(clf_line(T0 + i, f"10.8.{i % 200}.1", "-", "+0000") for i in range(100_000)).encode()
    member = gzip.compress(chunk, compresslevel=1)
    path = tmp_path / "long.log.gz"
    path.write_bytes(member * 300)  # 30,000,000 lines: far longer than the wait below
    child = subprocess.Popen(
        [sys.executable, "-m", "ratekeeper", "analyze", str(path), "--rules", "1/second", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)
        assert child.poll() is None, "the replay ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
