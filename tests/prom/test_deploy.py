"""deploy/prometheus: generated files are current, promtool accepts them, the dashboard runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from drs_prom.signals import promql
from tests.prom.fixtures import REPO, wait_until

DEPLOY = REPO / "deploy" / "prometheus"
BUILD_PROMTOOL = REPO / "tests" / "prom" / "promtool" / "build.sh"


def promtool() -> str:
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool not found (Debian package prometheus; make test-deps)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def promtool_k8s() -> str:
    """Upstream promtool with Kubernetes SD (Debian's is built without it); built once, cached."""
    out = subprocess.run([str(BUILD_PROMTOOL)], capture_output=True, text=True, timeout=3000)
    if out.returncode != 0:
        pytest.fail(f"cannot build promtool with kubernetes SD: {out.stderr.strip().splitlines()[-1:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1]


def run(*cmd: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, timeout=120)


def test_checked_in_rules_are_generated_from_promql():
    assert (DEPLOY / "rules" / "drs.rules.yml").read_text() == promql.rules_yaml(), (
        "run: drs-prom promql rules > deploy/prometheus/rules/drs.rules.yml"
    )


def test_checked_in_dashboard_is_generated_from_promql():
    assert (DEPLOY / "grafana" / "drs-nodes.json").read_text() == promql.dashboard_json(), (
        "run: drs-prom promql dashboard > deploy/prometheus/grafana/drs-nodes.json"
    )


def test_rules_use_the_same_strings_as_the_scheduler():
    groups = yaml.safe_load((DEPLOY / "rules" / "drs.rules.yml").read_text())["groups"]
    recorded = {r["record"]: r["expr"] for r in groups[0]["rules"]}
    names = promql.recorded_names("30s")
    for feature, query in promql.feature_queries("30s").items():
        assert recorded[names[feature]] == query


def test_promtool_check_rules():
    out = run(promtool(), "check", "rules", "rules/drs.rules.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    # 7 node recording + 3 node alerts, 4 guardrail signals + 6 rollout alerts, 8 per-pod usage rules
    assert "SUCCESS: 28 rules found" in out.stdout


def test_promtool_test_rules():
    out = run(promtool(), "test", "rules", "tests/drs.rules.test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_test_rules_can_fail(tmp_path):
    """Guard against a vacuous rules test: a wrong expectation must fail."""
    shutil.copytree(DEPLOY / "rules", tmp_path / "rules")
    (tmp_path / "tests").mkdir()
    text = (DEPLOY / "tests" / "drs.rules.test.yml").read_text()
    assert "value: 0.25" in text
    (tmp_path / "tests" / "t.yml").write_text(text.replace("value: 0.25", "value: 0.3", 1))
    out = run(promtool(), "test", "rules", "tests/t.yml", cwd=tmp_path)
    assert out.returncode != 0 and "drs:node_cpu:ratio_rate30s" in out.stdout + out.stderr


def test_promtool_check_static_config():
    out = run(promtool(), "check", "config", "prometheus-static.yml")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.integration
def test_promtool_check_kubernetes_config(promtool_k8s, tmp_path):
    out = run(promtool_k8s, "check", "config", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr
    # The check is real: an invalid SD role is refused (Debian's promtool refuses any k8s SD).
    bad = (DEPLOY / "prometheus.yml").read_text().replace("- role: pod\n", "- role: pods\n", 1)
    (tmp_path / "rules").mkdir()
    shutil.copy(DEPLOY / "rules" / "drs.rules.yml", tmp_path / "rules")
    (tmp_path / "prometheus.yml").write_text(bad)
    out = run(promtool_k8s, "check", "config", "prometheus.yml", cwd=tmp_path)
    assert out.returncode != 0 and "pods" in out.stdout + out.stderr
    cfg = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    sd = cfg["scrape_configs"][0]["kubernetes_sd_configs"][0]
    assert sd["namespaces"]["names"] == ["drs-system"]
    assert sd["selectors"][0]["label"] == "app.kubernetes.io/name=drs-node-exporter"


@pytest.mark.integration
def test_dashboard_expressions_parse_and_run(prometheus_both, drs_exporter):
    board = json.loads((DEPLOY / "grafana" / "drs-nodes.json").read_text())
    exprs = promql.dashboard_exprs(board)
    assert len(exprs) == 17  # 8 node panels + 8 rollout panels (arms, agreement, 4 guardrails, fallbacks, trips) + CPU
    for expr in exprs:
        prometheus_both.query(expr)  # raises unless the API answers success
    # The feature panels read recording rules: once evaluated, each has our node.
    for expr in exprs[:6]:
        wait_until(
            lambda expr=expr: any(
                r["metric"].get("nodename") == drs_exporter.node_name for r in prometheus_both.query(expr)
            ),
            40,
            f"dashboard expression to return data: {expr}",
        )


def test_scrape_config_matches_the_exporter_daemonset():
    """prometheus.yml discovers exactly what deploy/k8s/40-node-exporter.yaml runs."""
    ds = yaml.safe_load((REPO / "deploy" / "k8s" / "40-node-exporter.yaml").read_text())
    job = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["scrape_configs"][0]
    sd = job["kubernetes_sd_configs"][0]
    assert job["job_name"] == promql.EXPORTER_JOB  # the alert rules select this job
    assert sd["namespaces"]["names"] == [ds["metadata"]["namespace"]]
    key, _, value = sd["selectors"][0]["label"].partition("=")
    assert ds["spec"]["template"]["metadata"]["labels"][key] == value
    port_rule = next(
        r for r in job["relabel_configs"] if r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"]
    )
    ports = ds["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert any(p["name"] == port_rule["regex"] and p["containerPort"] == 9105 for p in ports)
    env = ds["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "NODE_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    } in env  # nodename = k8s node
