"""`drs-prom check-install` (what the chart's `helm test` pod runs) against a real Prometheus with the drs rules
and a real scheduler health port served over TLS with a self-signed certificate, as the chart serves it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from drs_prom.config import PrometheusSettings, ServingSettings
from drs_prom.ops.install_check import check_records, node_records
from drs_prom.scheduler.http.server import HealthServer
from drs_prom.scheduler.metrics import SchedulerMetrics
from tests.prom.fixtures import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def health_port():
    """The scheduler's port with the chart's default serving (TLS self-signed, /metrics authenticated): /readyz
    stays open, so the check needs no token."""
    metrics = SchedulerMetrics()
    serving = ServingSettings(tls="self-signed", authenticate_metrics=True)
    server = HealthServer("127.0.0.1:0", metrics.registry, lambda: True, lambda: True, serving, api_client=object())
    server.start()
    try:
        yield f"https://127.0.0.1:{server.port}"
    finally:
        server.stop()


def _check_install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drs_prom.cli", "check-install", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_node_records_are_the_chart_rules_recordings():
    assert node_records()[0] == "drs:node_cpu:ratio_rate30s" and len(node_records()) == 7


def test_a_complete_install_passes(prometheus_both, health_port):
    settings = PrometheusSettings(url=prometheus_both.url)
    # the node-features group is evaluated every 10 s and its rates need two scrapes: wait for the first evaluation
    wait_until(lambda: all(c.ok for c in check_records(settings)), 60, "the drs recording rules to have series")
    out = _check_install("--prometheus", prometheus_both.url, "--scheduler", health_port, "--insecure-skip-verify")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok   scheduler /readyz: ") and "answered 200 'ok'" in lines[0]
    assert [ln.split(": ", 1)[0] for ln in lines[1:]] == [f"ok   {n}" for n in node_records()]


def test_missing_parts_are_named_and_fail(prometheus_factory, health_port):
    bare = prometheus_factory(scrape_targets=[])  # no exporter, no rules: what a forgotten PrometheusRule looks like
    out = _check_install("--prometheus", bare.url, "--scheduler", health_port)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    # the self-signed certificate is refused unless the check is told to skip verification
    assert lines[0].startswith("FAIL scheduler /readyz: ") and "CERTIFICATE_VERIFY_FAILED" in lines[0]
    assert all(ln.startswith("FAIL drs:node_") and "no series" in ln for ln in lines[1:]) and len(lines) == 8
