"""The test helpers as an application's own test suite uses them: the example
Django project's tests (pytest, with ratekeeper's plugin) and the example
Rack app's tests (Minitest, with Ratekeeper::Testing::Minitest, and RSpec,
with Ratekeeper::Testing::RSpec), each run in two orders: no test depends on
another."""

import os
import subprocess
import sys

import documentation
from conftest import ROOT


def run(*command: str, env: dict = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_a_django_suite_with_the_pytest_plugin():
    for reverse in ("0", "1"):
        out = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/django_project/tests",
                  env={"RK_REVERSE": reverse, "RATEKEEPER_STORE": "memory://"})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "4 passed" in out.stdout, out.stdout


def test_a_rack_suite_with_the_minitest_helper():
    for seed in ("1", "2"):
        out = run("ruby", "examples/rack_test.rb", "--seed", seed, env={"RATEKEEPER_STORE": "memory://"})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "3 runs" in out.stdout and "0 failures, 0 errors" in out.stdout, out.stdout


def test_a_rack_suite_with_the_rspec_helper():
    for seed in ("1", "2"):
        out = run("rspec", "--order", f"rand:{seed}", "examples/rack_spec.rb", env={"RATEKEEPER_STORE": "memory://"})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "3 examples, 0 failures" in out.stdout, out.stdout


def test_the_readme_shows_these_suites_as_they_are():
    from pathlib import Path

    readme = documentation.text()
    django_tests = Path(ROOT, "examples/django_project/tests/test_limits.py").read_text().split('"""', 2)[2].strip()
    rack_tests = Path(ROOT, "examples/rack_test.rb").read_text().strip()
    assert django_tests in readme and rack_tests in readme
