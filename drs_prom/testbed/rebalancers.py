"""The rebalancers a testbed run may add beside its scheduler: ``drs-prom rebalance`` or the real descheduler.

A run named ``<scheduler>+rebalance`` starts ``drs-prom rebalance`` (mode ``evict``) after the scheduler, and
``<scheduler>+descheduler`` kubernetes-sigs/descheduler (drs_prom.testbed.descheduler) configured from the same
settings. The settings are the scenario's (``rebalance`` section, else the configuration's defaults, as ``bench``
takes them: drs_prom.sim.rebalancer.rebalance_settings) with every duration divided by the run's ``speed``, since the
testbed's clock runs that many times faster than a cluster's: the interval, the window and its step, the minimum pod
age and the owner's cool-down. Both act on the run's namespace only. The rebalancer's PromQL guardrails are off in
these runs (their windows are not on the testbed's time scale); the evictions and what they cost are what the run
measures, counted by the testbed's stand-in for the pods' controllers (drs_prom.testbed.replacements).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drs_prom.config import Normalisation, RebalanceSettings, Settings, duration_seconds
from drs_prom.errors import ConfigError
from drs_prom.sim.rebalancer import rebalance_settings
from drs_prom.sim.scenario import Scenario
from drs_prom.testbed.controlplane import TESTBED_TAINT, ControlPlane
from drs_prom.testbed.descheduler import (
    build_descheduler,
    low_node_utilization_policy,
    start_descheduler,
    token_secret,
    utilisation_query,
)
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port
from drs_prom.testbed.replacements import ReplacementLog
from drs_prom.testbed.run_context import RunConfig
from drs_prom.testbed.schedulers import DESCHEDULER, DRS_CLI, REBALANCE, REBALANCERS, drs_config

TOKEN_SECRET = "descheduler-prometheus"


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def scaled_settings(scenario: Scenario, speed: float, namespace: str) -> RebalanceSettings:
    """The scenario's rebalancer settings on the testbed's clock (module docstring), evicting, in ``namespace``."""
    r = rebalance_settings(scenario)
    if speed <= 0:
        raise ConfigError("speed must be positive")
    return r.model_copy(
        update={
            "mode": "evict",
            "interval_seconds": r.interval_seconds / speed,
            "window": _ms(duration_seconds(r.window) / speed),
            "step": _ms(duration_seconds(r.step) / speed),
            "min_age_seconds": r.min_age_seconds / speed,
            "cooldown_seconds": r.cooldown_seconds / speed,
            "namespaces": [namespace],
            "guardrails": r.guardrails.model_copy(update={"enabled": False}),
        }
    )


@dataclass
class RunningRebalancer:
    kind: str
    proc: ManagedProcess

    def stop(self) -> None:
        self.proc.stop()


def start_rebalancer(
    kind: str,
    cp: ControlPlane,
    workdir: Path,
    scheduler_config: Path,
    settings: RebalanceSettings,
    prometheus_url: str,
    node_selector: str | None = None,
) -> RunningRebalancer:
    """Start the ``kind`` rebalancer against ``cp`` and the run's Prometheus. ``scheduler_config``: the drs-prom
    settings the run's scheduler got (its Prometheus, model and scheduler name), which ``drs-prom rebalance`` takes
    with the ``rebalance`` section added, so that it predicts the replacements of that scheduler's pods with its
    policy."""
    assert cp.admin_kubeconfig is not None and cp.ca_file is not None
    if kind == REBALANCE:
        cfg: dict[str, Any] = yaml.safe_load(scheduler_config.read_text())
        section = settings.model_dump(mode="json")
        section["metrics_listen"] = f"{LOOPBACK}:{free_port()}"
        section["journal_path"] = str(workdir / "rebalance-journal.sqlite")
        cfg["rebalance"] = section
        Settings.model_validate(cfg)  # a bad section fails here, in one line, not in the child
        path = workdir / "drs-rebalance.yaml"
        path.write_text(yaml.safe_dump(cfg))
        argv = [*DRS_CLI, "rebalance", "--config", str(path), "--kubeconfig", str(cp.admin_kubeconfig)]
        return RunningRebalancer(kind, ManagedProcess("drs-rebalance", argv, workdir / "drs-rebalance.log"))
    if kind == DESCHEDULER:
        from kubernetes import client

        ns = settings.namespaces[0]
        core = client.CoreV1Api(cp.admin_client)
        core.create_namespaced_secret(ns, token_secret(ns, TOKEN_SECRET))
        query = utilisation_query(settings.window)
        policy = low_node_utilization_policy(settings, prometheus_url, query, (ns, TOKEN_SECRET), node_selector)
        proc = start_descheduler(
            build_descheduler(),
            workdir,
            cp.admin_kubeconfig,
            cp.ca_file.read_bytes(),
            policy,
            settings.interval_seconds,
        )
        return RunningRebalancer(kind, proc)
    raise ConfigError(f"unknown rebalancer {kind!r}; known: {', '.join(REBALANCERS)}")


def start_for_run(
    kind: str,
    cp: ControlPlane,
    rundir: Path,
    norm: Normalisation,
    cfg: RunConfig,
    settings: RebalanceSettings,
    prometheus_url: str,
    external: bool,
) -> RunningRebalancer:
    """``kind`` beside a run's scheduler: drs-prom's settings file as the run's drs-prom processes get it (its
    Prometheus, model, time scale), and on a ``--kubeconfig`` cluster only the testbed's marked nodes."""
    conf, _ = drs_config(
        rundir, "rebalance", prometheus_url, norm, cfg.scrape_seconds, False, cfg.model_path, free_port(),
        speed=cfg.speed,
    )  # fmt: skip
    marks = f"{TESTBED_TAINT['key']}={TESTBED_TAINT['value']}" if external else None
    return start_rebalancer(kind, cp, rundir, conf, settings, prometheus_url, marks)


def rebalancing(
    kind: str | None, evicted: Mapping[str, float], log: ReplacementLog | None, nodes: int, simulated_seconds: float
) -> dict[str, Any]:
    """What a run's rebalancer did: evictions (every running pod deleted), replacements made, and evictions per
    node-hour of simulated time (the bench's unit)."""
    hours = nodes * max(simulated_seconds, 1e-9) / 3600.0
    return {
        "rebalancer": kind,
        "evictions": len(evicted),
        "replacements": sum(e.replacement is not None for e in log.evictions) if log is not None else 0,
        "evictions_per_node_hour": len(evicted) / hours,
    }
