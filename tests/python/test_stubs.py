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
