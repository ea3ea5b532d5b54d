"""Load the shared control-plane fixtures (tests/k8s) for the differential tests."""


def pytest_configure(config):
    pm = config.pluginmanager
    if not pm.has_plugin("tests.k8s.fixtures"):
        pm.import_plugin("tests.k8s.fixtures")
