"""Expose tests/prom fixtures to the tests here (the lead may wire them suite-wide via pytest_plugins)."""

from tests.prom.fixtures import *  # noqa: F401,F403
