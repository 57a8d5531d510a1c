"""Python offers the surface tests/cases/surface.json lists, as Ruby does
(tests/ruby/test_surface.rb walks the same list): every function and class,
every member, every parameter by name, and nothing public beyond it."""

import inspect
import json
import sys
from pathlib import Path

import pytest

import ratekeeper

SURFACE = json.loads((Path(__file__).parent.parent / "cases" / "surface.json").read_text())


def parameters(target) -> list:
    """A callable's parameter names, without self."""
    return [name for name in inspect.signature(target).parameters if name != "self"]


# PyO3 gives a class its constructor's signature on CPython 3.10 and later
# only (3.9's types carry no __text_signature__); the stubs say it there
CLASS_SIGNATURES = sys.version_info >= (3, 10)


FUNCTIONS = {**SURFACE["functions"], **SURFACE["python_only_functions"]}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function(name):
    assert sorted(parameters(getattr(ratekeeper, name))) == sorted(FUNCTIONS[name]["params"])


def test_constants_and_exports():
    for name in SURFACE["constants"]:
        assert hasattr(ratekeeper, name)
    listed = set(FUNCTIONS) | set(SURFACE["constants"]) | set(SURFACE["classes"])
    def is_error(name: str) -> bool:
        value = getattr(ratekeeper, name)
        return isinstance(value, type) and issubclass(value, BaseException)

    exported = {n for n in ratekeeper.__all__ if not n.startswith("_") and not is_error(n)}
    assert exported == listed, "ratekeeper.__all__ and surface.json differ"


@pytest.mark.parametrize("name", sorted(SURFACE["classes"]))
def test_class(name):
    spec = SURFACE["classes"][name]
    cls = getattr(ratekeeper, name)
    members = {**spec["members"], **spec.get("python_only", {})}
    public = {member for member in dir(cls) if not member.startswith("_")}
    assert public == set(members), f"{name}: members differ from surface.json"
    for member, about in members.items():
        if "params" in about:
            assert sorted(parameters(getattr(cls, member))) == sorted(about["params"]), f"{name}.{member}"
    if "new" in spec and CLASS_SIGNATURES:
        assert sorted(parameters(cls)) == sorted(spec["new"]["params"]), f"{name}()"


@pytest.mark.skipif(not CLASS_SIGNATURES, reason="CPython 3.9's classes carry no constructor signature")
def test_limiter_options_are_the_cores():
    """Limiter's keywords are exactly the options the core names (its
    defaults), then the old names of the renamed ones."""
    assert parameters(ratekeeper.Limiter)[1:] == [*ratekeeper.DEFAULTS, "policy_refresh", "policies"]
