"""The documentation as the tests read it: README.md, then every page of the
docs site in mkdocs.yml's order, as one text, so that a block, a table or a
line is found wherever it lives."""

import re
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]


def pages() -> List[Path]:
    """README.md and the site's pages (the changelog, CHANGELOG.md, aside)."""
    nav = re.findall(r"([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [ROOT / "README.md"] + [ROOT / "docs" / name for name in nav if name != "changelog.md"]


def text() -> str:
    """Every page's text, one after the other."""
    return "\n".join(page.read_text() for page in pages())
