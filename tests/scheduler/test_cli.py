"""``drs-prom run`` and ``drs-prom extender`` as processes, the way a Deployment runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from drs_prom.testbed.process import free_port
from tests.scheduler.conftest import list_pods, pod_body
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from drs_prom.cli import main; main()"]


def start(args, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, *args],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


def _scrape_if(port: int, line: str) -> str | None:
    """The scheduler's /metrics text if it has ``line``, else None (for wait_for)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return text if line in text else None


def test_bad_config_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("scheduler:\n  state_refresh_seconds: -1\n")
    proc = subprocess.run(
        [*CLI, "run", "--config", str(bad)], capture_output=True, text=True, timeout=60, cwd=str(REPO)
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "drs-prom: error: invalid config: scheduler.state_refresh_seconds: Input should be greater than 0 (in "
        + str(bad)
        + ")"
    ]
    proc = subprocess.run(
        [*CLI, "run", "--kubeconfig", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO),
    )
    assert proc.returncode == 2 and proc.stderr.startswith("drs-prom: error: no usable Kubernetes credentials")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_run_command_binds_and_stops_cleanly(core, ns, fake_nodes, drs_sa_kubeconfig, tmp_path):
    fake_nodes("cli-node", cpu="8", memory="16Gi")
    port = free_port()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 0.5},  # nothing listens
                "scheduler": {
                    "namespace": ns,
                    "lease_namespace": "drs-system",
                    "metrics_listen": f"127.0.0.1:{port}",
                    "journal_path": str(tmp_path / "journal.sqlite"),
                    "model_path": str(tmp_path / "none.keras"),
                    "lease_duration_seconds": 4,
                    "renew_deadline_seconds": 3,
                    "retry_period_seconds": 0.5,
                },
                "retrain": {"model_store": str(tmp_path / "store")},
            }
        )
    )
    proc = start(["run", "--config", str(cfg), "--kubeconfig", str(drs_sa_kubeconfig)], tmp_path / "run.log")
    try:
        wait_for(lambda: proc.poll() is not None or http_ok(f"http://127.0.0.1:{port}/readyz"), 60, "readyz")
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-2000:]
        for i in range(5):
            core.create_namespaced_pod(ns, pod_body(f"c{i}"), _preload_content=False)
        wait_for(lambda: all(p["spec"].get("nodeName") == "cli-node" for p in list_pods(core, ns)), 30, "5 bound")
        # the bind counter moves when the bind's reply reaches the bind worker, just after the apiserver shows it
        text = wait_for(lambda: _scrape_if(port, 'drs_binds_total{outcome="bound"} 5.0'), 10, "5 binds counted")
        assert "drs_leader 1.0" in text
    finally:
        rc = stop(proc)
    log = (tmp_path / "run.log").read_text()
    assert rc == 0, log[-2000:]
    assert "no valid model" in log  # the missing model file was reported, and the fallback scheduled


@pytest.mark.integration
def test_extender_command_serves_filter(tmp_path):
    port = free_port()
    proc = start(
        [
            "extender",
            "--listen",
            f"127.0.0.1:{port}",
            "--no-cache",
            "--prometheus",
            f"http://127.0.0.1:{free_port()}",
            "--model",
            str(tmp_path / "none.keras"),
        ],
        tmp_path / "ext.log",
    )
    try:
        wait_for(lambda: proc.poll() is not None or http_ok(f"http://127.0.0.1:{port}/healthz"), 60, "healthz")
        assert proc.poll() is None, (tmp_path / "ext.log").read_text()[-2000:]
        node = {
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        body = {"Pod": pod_body("p", cpu="2"), "Nodes": {"items": [node]}}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/filter", data=json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=10) as r:
            out = json.load(r)
        assert out["Nodes"]["items"] == [] and out["FailedNodes"] == {"n1": "Insufficient cpu"}
    finally:
        assert stop(proc) == 0
