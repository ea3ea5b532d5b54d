"""Load tests.prom.fixtures for the tests here.

Registered as a plugin (once, under its module name) rather than star-imported, so that
tests/scheduler, tests/sim and tests/retrain, which load the same plugin, share one
session-scoped Prometheus and exporter set with these tests instead of starting a second.
"""


def pytest_configure(config):
    pm = config.pluginmanager
    if not pm.has_plugin("tests.prom.fixtures"):
        pm.import_plugin("tests.prom.fixtures")
