"""What the package says it supports is what CI proves: docs/install.md's
table of CPython and Django versions, the cells scripts/test runs
(tests/matrix/cell), the wheel's classifiers and requires-python, the
django extra's lower bound, and the gem's required Ruby."""

import re
from pathlib import Path
from typing import Dict, List, Tuple

from conftest import ROOT

REPO = Path(ROOT)


def documented() -> Dict[str, Tuple[str, str]]:
    """docs/install.md's table: CPython version -> (Django series, what runs)."""
    table = (REPO / "docs" / "install.md").read_text().split("<!-- matrix -->")
    assert len(table) == 3, "docs/install.md marks its matrix with <!-- matrix -->"
    rows = re.findall(r"^\| (3\.\d+) \| (\d+(?:\.\d+)?)[^|]*\| ([^|]+) \|$", table[1], re.M)
    assert rows, "no rows in docs/install.md's matrix"
    return {python: (django, what.strip()) for python, django, what in rows}


def cells() -> List[Tuple[str, str]]:
    """scripts/test's matrix: (CPython version, Django series) of each cell."""
    script = (REPO / "scripts" / "test").read_text()
    loop = re.search(r"^for cell in (.*); do\n  (?:\w+=\S+ )*bash tests/matrix/cell ", script, re.M)
    assert loop, "scripts/test runs the matrix's cells in one loop"
    found = []
    for python, low, high in re.findall(r'"(3\.\d+) django>=([\d.]+),<([\d.]+)"', loop.group(1)):
        # one series: >=4.2,<4.3 is 4.2; >=6,<7 is every 6.x
        *major, last = low.split(".")
        assert high == ".".join([*major, str(int(last) + 1)]), f"{python}: >={low},<{high} is not one series"
        series = low
        found.append((python, series))
    assert len(found) == loop.group(1).count('"') // 2, f"a cell scripts/test runs is not read: {loop.group(1)}"
    return found


def classifiers() -> List[str]:
    text = (REPO / "pyproject.toml").read_text()
    return re.findall(r'^\s*"([^"]+ :: [^"]+)",$', text, re.M)


def test_the_table_is_the_cells_and_the_whole_suite():
    table = documented()
    whole = [python for python, (_, what) in table.items() if what == "the whole suite"]
    assert whole == ["3.11"], f"the whole suite runs on this machine's CPython 3.11: {table}"
    matrix = {python: django for python, (django, what) in table.items() if what == "the matrix's tests"}
    assert set(table) == set(matrix) | set(whole), f"a row says neither: {table}"
    assert sorted(cells()) == sorted(matrix.items()), f"scripts/test runs {cells()}; docs/install.md says {matrix}"


def test_classifiers_and_bounds_say_what_the_table_proves():
    table = documented()
    said = classifiers()
    pythons = {c.rsplit(" ", 1)[1] for c in said if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert pythons == set(table), f"classifiers {sorted(pythons)}; tested {sorted(table)}"
    djangos = {c.rsplit(" ", 1)[1] for c in said if c.startswith("Framework :: Django :: ")}
    assert djangos == {django for django, _ in table.values()}, f"classifiers {sorted(djangos)}; tested {table}"
    text = (REPO / "pyproject.toml").read_text()
    lowest = min(table, key=lambda v: tuple(map(int, v.split("."))))
    assert f'requires-python = ">={lowest}"' in text
    oldest = min((django for django, _ in table.values()), key=lambda v: tuple(map(int, v.split("."))))
    assert re.findall(r'"Django>=([\d.]+)"', text) == [oldest, oldest], "the extras' Django bound is the oldest tested"


def test_the_gem_asks_for_the_ruby_ci_runs():
    gemspec = (REPO / "ratekeeper.gemspec").read_text()
    assert 'spec.required_ruby_version = ">= 3.1"' in gemspec
    assert "Ruby 3.1 with Rack 2.2 and Rails 6.1" in (REPO / "docs" / "install.md").read_text()
