"""Load tests.k8s.fixtures for tests under tests/k8s.

tests/conftest.py is expected to declare ``pytest_plugins = ["tests.k8s.fixtures"]``;
until it does (or when it doesn't), register the same plugin here, once, under the same
name, so there is only ever one session-scoped control plane.
"""


def pytest_configure(config):
    pm = config.pluginmanager
    if not pm.has_plugin("tests.k8s.fixtures"):
        pm.import_plugin("tests.k8s.fixtures")
