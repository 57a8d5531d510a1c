"""README's layout section says each module of the core depends only on
those above it in its list: held to the core's sources (their `crate::`
paths outside comments and `#[cfg(test)]` code)."""

import re
from pathlib import Path

import documentation
from conftest import ROOT

CORE = Path(ROOT) / "core" / "src"


def listed_order() -> list:
    text = documentation.text()
    start = text.index("The core, one module per idea, each depending only on those above it")
    paragraph = text[start:text.index("The log format itself is the `engine` crate's", start)]
    modules = {p.stem for p in CORE.glob("*.rs")} | {p.name for p in CORE.iterdir() if p.is_dir()}
    order = []
    for name in re.findall(r"`([a-z_]+)/?`", paragraph):
        if name in modules and name not in order and name != "lib":
            order.append(name)
    return order


def uses(module: str) -> set:
    root = CORE / module
    # a module is its file, its folder, or both (`net.rs` and its `net/tests.rs`)
    files = sorted(root.rglob("*.rs")) if root.is_dir() else []
    files += [path for path in [CORE / f"{module}.rs"] if path.exists()]
    found = set()
    for path in files:
        if path.name == "tests.rs":
            continue
        code = path.read_text().split("#[cfg(test)]")[0]
        lines = [line for line in code.splitlines() if not line.lstrip().startswith("//")]
        found |= set(re.findall(r"crate::([a-z_]+)", "\n".join(lines)))
    return found - {module}


def test_every_module_is_listed_and_depends_only_on_those_above_it():
    order = listed_order()
    modules = {p.stem for p in CORE.glob("*.rs")} - {"lib"} | {p.name for p in CORE.iterdir() if p.is_dir()}
    assert set(order) == modules, f"README's list and core/src differ: {sorted(set(order) ^ modules)}"
    for i, module in enumerate(order):
        below = (uses(module) & modules) - set(order[:i])
        assert not below, f"{module} uses {sorted(below)}, listed below it in README's layout section"


# what a newcomer reads: no source file of the crates or the bindings over this
MOST_LINES = 600
SOURCES = ("core", "engine", "module", "server", "replay", "python", "ruby")
KINDS = {".rs", ".py", ".pyi", ".rb", ".rbs", ".lua", ".erb", ".js", ".html"}


def test_no_source_file_is_over_600_lines():
    """Each crate's and binding's sources (their tests aside) are at most
    600 lines (issue 46's bound), so that a file holds one thing."""
    checked, over = 0, []
    for top in SOURCES:
        for path in sorted((Path(ROOT) / top).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if path.suffix not in KINDS or not path.is_file() or "target" in parts:
                continue
            if "tests" in parts or path.name == "tests.rs":
                continue
            checked += 1
            lines = len(path.read_text(errors="replace").splitlines())
            if lines > MOST_LINES:
                over.append(f"{path.relative_to(ROOT)}: {lines}")
    assert checked > 100, f"only {checked} source files found under {SOURCES}"
    assert not over, f"over {MOST_LINES} lines: {over}"
