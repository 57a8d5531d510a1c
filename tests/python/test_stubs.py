"""The .pyi stubs match the native module (mypy.stubtest), and the package is typed."""

import os
import subprocess
import sys

import ratekeeper


def test_stubs_match_the_module():
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "ratekeeper._ratekeeper", "--ignore-missing-stub"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_ships_its_types():
    here = os.path.dirname(ratekeeper.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    assert os.path.exists(os.path.join(here, "_ratekeeper.pyi"))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_awaited_twins_are_written_from_the_blocking_ones():
    """Each awaited twin's stub (acheck, ablock, adecide...) is what
    scripts/stubs writes from its blocking method's: the same arguments, an
    Awaitable of the same result."""
    stubs = os.path.join(ROOT, "scripts", "stubs")
    result = subprocess.run([sys.executable, stubs, "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # and the check can fail: a twin that drifted is named
    drifted = subprocess.run(
        [sys.executable, "-c", "import runpy, sys; m = runpy.run_path(sys.argv[1]); "
         "text = m['STUBS'].read_text().replace('def acheck(self, key: _KeyLike,', "
         "'def acheck(self, key: str,', 1); "
         "assert 'key: str' in text; print(m['written'](text)[1])", stubs],
        capture_output=True, text=True)
    assert drifted.returncode == 0, drifted.stderr
    assert drifted.stdout.strip() == "['acheck']"
