"""Django for the example project's tests; RK_REVERSE=1 runs them in reverse order (they must not care)."""

import os
import sys

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")
django.setup()


def pytest_collection_modifyitems(items):
    if os.environ.get("RK_REVERSE") == "1":
        items.reverse()
