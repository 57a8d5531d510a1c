"""Every code block of the documentation (README.md and the pages of docs/)
is run or checked here, or by the test named for its kind, so that none can
rot: Python is compiled, Ruby read by `ruby -c`, shell by `bash -n`, a
policy file built into a gate by the core, YAML parsed; the nginx and Caddy
recipes are run by the edge tests (test_edge.py, test_gate_table.py), the
ACL lines by test_acl.py and test_module.py, `ratekeeper analyze`'s output
against the command shown above it. And the site builds: `mkdocs build
--strict` (every link and anchor found)."""

import os
import re
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import List, Tuple

import pytest
import yaml

import documentation
import ratekeeper
from conftest import ROOT

KINDS = {"python", "ruby", "sh", "toml", "yaml", "nginx", "caddy", "text"}


def blocks() -> List[Tuple[str, int, str, str, str]]:
    """(page, line, language, the text before it, code) of every fenced block."""
    out = []
    for page in documentation.pages():
        lines = page.read_text().split("\n")
        i = 0
        while i < len(lines):
            if lines[i].startswith("```"):
                start, language = i, lines[i][3:].strip()
                i += 1
                body = []
                while not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                before = "\n".join(lines[max(0, start - 3):start])
                out.append((page.relative_to(ROOT).as_posix(), start + 1, language, before, "\n".join(body) + "\n"))
            i += 1
    return out


BLOCKS = blocks()


def of(kind: str):
    return [pytest.param(code, before, id=f"{page}:{line}") for page, line, lang, before, code in BLOCKS if lang == kind]


def test_every_block_names_a_language_checked_here():
    unnamed = [f"{page}:{line} ({lang or 'no language'})" for page, line, lang, _, _ in BLOCKS if lang not in KINDS]
    assert not unnamed, f"name each block's language (one of {sorted(KINDS)}): {unnamed}"
    assert len(BLOCKS) > 50


@pytest.mark.parametrize("code,before", of("python"))
def test_python_blocks_compile(code, before):
    compile(code, "block", "exec")


def test_ruby_blocks_are_ruby(tmp_path):
    found = of("ruby")
    for n, param in enumerate(found):
        (tmp_path / f"b{n}.rb").write_text(param.values[0])
    for n, param in enumerate(found):
        run = subprocess.run(["ruby", "-c", str(tmp_path / f"b{n}.rb")], capture_output=True, text=True)
        assert run.returncode == 0, f"{param.id}: {run.stderr}"


@pytest.mark.parametrize("code,before", of("sh"))
def test_shell_blocks_parse(code, before):
    run = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("code,before", of("toml"))
def test_policy_files_make_a_gate(code, before, tmp_path):
    tomllib.loads(code)
    path = tmp_path / "policy.toml"
    path.write_text(code)
    # the core reads and checks the file (on a memory store: no Redis needed)
    gate = ratekeeper.Gate(str(path), limiter=ratekeeper.Limiter("1/second"))
    assert gate.decide("GET", "/", "example.com", "127.0.0.1", {}) is not None


@pytest.mark.parametrize("code,before", of("yaml"))
def test_yaml_blocks_parse(code, before):
    assert yaml.safe_load(code)


@pytest.mark.parametrize("code,before", of("nginx") + of("caddy"))
def test_proxy_recipes_are_the_ones_the_edge_tests_run(code, before):
    marker = re.search(r"<!-- (edge-[a-z-]+) -->\s*$", before)
    assert marker, "a proxy recipe is marked <!-- edge-NAME --> and run by the edge tests"
    name = marker.group(1)[len("edge-"):]
    runs = [p.name for p in Path(ROOT, "tests/python").glob("test_*.py") if f'"{name}"' in p.read_text()]
    assert runs, f"no test runs the recipe edge-{name}"


def test_text_blocks(tmp_path):
    """Each `text` block is one of: ACL lines (run by test_acl.py and
    test_module.py), `ratekeeper analyze`'s output (run here), the layout of
    the repository (each folder it names exists), a store URL (its TLS
    parameters are the ones the stores page lists)."""
    texts = [(page, line, before, code) for page, line, lang, before, code in BLOCKS if lang == "text"]
    for page, line, before, code in texts:
        where = f"{page}:{line}"
        first = code.split("\n", 1)[0]
        if first.startswith("ACL SETUSER"):
            assert all(ln.startswith("ACL SETUSER ") for ln in code.strip().splitlines()), where
        elif first.startswith("examples/access.log:"):
            analyze_output_is_what_the_command_prints(page, line, code, tmp_path)
        elif first.startswith("engine/"):
            for folder in re.findall(r"^([a-z]+)/ ", code, re.M):
                assert Path(ROOT, folder).is_dir(), f"{where}: {folder}/ is not in the repository"
        elif first.startswith("rediss://"):
            params = set(re.findall(r"[?&](\w+)=", first))
            listed = set(re.findall(r"`(ssl_\w+)`", Path(ROOT, page).read_text()))
            assert params and params <= listed, f"{where}: {params - listed} not described"
        else:
            pytest.fail(f"{where}: a text block this test does not know how to check")


def analyze_output_is_what_the_command_prints(page, line, shown, tmp_path):
    """The `sh` block just before the output, run: every line shown is printed."""
    earlier = [b for b in BLOCKS if b[0] == page and b[1] < line and b[2] == "sh"]
    command = earlier[-1][4].replace("\\\n", " ").strip()
    assert command.startswith("python3 -m ratekeeper analyze "), command
    # (the picture aside: test_analyze.py draws it where matplotlib is installed)
    command = re.sub(r" --plot \S+", "", command.replace("python3", sys.executable, 1))
    run = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    printed = {ln.rstrip() for ln in run.stdout.splitlines()}
    missing = [ln for ln in shown.rstrip().splitlines() if ln.rstrip() not in printed]
    assert not missing, f"{page}:{line} shows lines the command does not print: {missing}"


def test_the_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: run scripts/setup-debian")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "site" / "edge" / "index.html").exists()
