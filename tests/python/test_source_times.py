"""scripts/source-times, which lets CI's build cache serve a fresh clone: a
file whose content a run on the cache saw before gets that run's time back
(cargo reuses what it built from it); a new or changed one gets this run's
time (cargo builds it again)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SCRIPT = str(Path(ROOT) / "scripts" / "source-times")
GIT = ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci"]


def run(clone: Path, times: Path) -> str:
    out = subprocess.run([sys.executable, SCRIPT, str(times)], cwd=clone, check=True, capture_output=True, text=True)
    return out.stdout


def mtime(path: Path) -> int:
    return os.stat(path).st_mtime_ns


def test_unchanged_files_get_their_first_time_back_and_changed_ones_a_new_one(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "lib.rs").write_text("fn a() {}\n")
    (origin / "main.rs").write_text("fn main() {}\n")
    (origin / "proto").mkdir()
    (origin / "proto" / "a.proto").write_text("syntax = \"proto3\";\n")
    subprocess.run(["git", "init", "-q"], cwd=origin, check=True)
    subprocess.run(["git", "add", "."], cwd=origin, check=True)
    subprocess.run([*GIT, "commit", "-qm", "first"], cwd=origin, check=True)
    times = tmp_path / "times.tsv"

    first = tmp_path / "first"
    subprocess.run(["git", "clone", "-q", str(origin), str(first)], check=True)
    assert "0 of 3 files" in run(first, times)
    seen = {name: mtime(first / name) for name in ("lib.rs", "main.rs")}

    (origin / "main.rs").write_text("fn main() { a() }\n")
    subprocess.run([*GIT, "commit", "-qam", "second"], cwd=origin, check=True)
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(origin), str(second)], check=True)
    assert mtime(second / "lib.rs") > seen["lib.rs"], "a clone's files carry the clone's time"
    assert "2 of 3 files" in run(second, times)
    assert mtime(second / "lib.rs") == seen["lib.rs"], "an unchanged file has the time it was first seen"
    assert mtime(second / "main.rs") > seen["main.rs"], "a changed file is newer than what was built from it"
    assert mtime(second / "proto") == mtime(second / "proto" / "a.proto") == mtime(first / "proto"), \
        "a directory (which a build script may watch) has its newest file's time"

    # back to the first content: newer again, never the first run's time
    (origin / "main.rs").write_text("fn main() {}\n")
    subprocess.run([*GIT, "commit", "-qam", "third"], cwd=origin, check=True)
    third = tmp_path / "third"
    subprocess.run(["git", "clone", "-q", str(origin), str(third)], check=True)
    run(third, times)
    assert mtime(third / "main.rs") > mtime(second / "main.rs")
    assert mtime(third / "lib.rs") == seen["lib.rs"]
    lines = times.read_text().splitlines()
    assert sorted(line.split("\t")[0] for line in lines) == ["lib.rs", "main.rs", "proto/a.proto"]


def test_it_refuses_to_run_without_a_times_file():
    out = subprocess.run([sys.executable, SCRIPT], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and "usage: scripts/source-times TIMES_FILE" in out.stderr
