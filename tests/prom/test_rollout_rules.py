"""The generated rollout alerts (guardrails, trip, rollback) under promtool's unit tests,
and the tests themselves can fail (a wrong threshold is caught)."""

from __future__ import annotations

import shutil

from drs_prom.signals import promql
from tests.prom.test_deploy import DEPLOY, promtool, run


def test_promtool_rollout_alert_tests_pass():
    out = run(promtool(), "test", "rules", "tests/drs.rollout.test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_rollout_alert_tests_can_fail(tmp_path):
    """The same tests against rules generated with a higher imbalance threshold must fail on that alert."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    params = promql.RuleParams()
    loose = tuple((n, 5.0 if n == "imbalance" else t) for n, t in params.thresholds)
    (tmp_path / "rules" / "drs.rules.yml").write_text(promql.rules_yaml(promql.RuleParams(thresholds=loose)))
    shutil.copy(DEPLOY / "tests" / "drs.rollout.test.yml", tmp_path / "tests" / "t.yml")
    out = run(promtool(), "test", "rules", "tests/t.yml", cwd=tmp_path)
    assert out.returncode != 0 and "DrsGuardrailImbalance" in out.stdout + out.stderr
    assert "DrsGuardrailHotNode" not in out.stdout + out.stderr  # only the changed alert fails


def test_alerts_and_scheduler_share_signals_and_thresholds():
    from drs_prom.config import Settings
    from drs_prom.scheduler.decision.guardrails import rules_for

    text = promql.rules_yaml()
    for rule in rules_for(Settings().rollout.guardrails, Settings().prometheus):
        assert f"{rule.expr} > {rule.threshold:g}" in text, rule.name


def test_prometheus_scrapes_the_scheduler_under_the_job_the_guardrails_read():
    import yaml

    from tests.prom.fixtures import REPO

    dep = yaml.safe_load((REPO / "deploy" / "k8s" / "30-scheduler.yaml").read_text())
    jobs = {j["job_name"]: j for j in yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["scrape_configs"]}
    job = jobs[promql.SCHEDULER_JOB]
    key, _, value = job["kubernetes_sd_configs"][0]["selectors"][0]["label"].partition("=")
    assert dep["spec"]["template"]["metadata"]["labels"][key] == value
    port = next(
        r for r in job["relabel_configs"] if r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"]
    )
    ports = dep["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert any(p["name"] == port["regex"] and p["containerPort"] == 10259 for p in ports)
    static = yaml.safe_load((DEPLOY / "prometheus-static.yml").read_text())["scrape_configs"]
    assert promql.SCHEDULER_JOB in {j["job_name"] for j in static}
