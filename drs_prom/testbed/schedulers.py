"""The schedulers under test, each started as its own process for one run and stopped after it.

* ``kube-scheduler``: the real binary with its default profile (``default-scheduler``).
* ``kube-scheduler-most-allocated``: the same binary with the profile GPU clusters configure
  (``most_allocated_profile``): NodeResourcesFit's ``MostAllocated`` strategy over cpu, memory and ``nvidia.com/gpu``.
* ``kube-scheduler+drs``: the Helm chart's ``mode: kube-scheduler``: a second kube-scheduler (the same binary)
  whose one profile is ``drs-scheduler``, every kube-scheduler filter on, and ``drs-prom extender`` beside it for
  prioritize only (``second_scheduler_config``, the chart's defaults; tests/helm checks they agree).
* ``drs`` and every heuristic name: ``drs-prom run`` (``--policy NAME`` for a heuristic; the shipped
  model for ``drs``), reading the run's Prometheus; with ``replicas=2`` two replicas elect a leader.

All listen on 127.0.0.1 only. ``rss_bytes()`` reads the processes' resident memory (/proc).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from drs_prom.config import Normalisation
from drs_prom.errors import ConfigError
from drs_prom.policies.device_fit import CPU_WEIGHT, GPU, GPU_WEIGHT, MEMORY_WEIGHT
from drs_prom.testbed.build import ControlPlaneError
from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port, wait_http
from drs_prom.usage.estimator import save_usage_model, shipped_usage_model

KUBE = "kube-scheduler"
KUBE_MOST_ALLOCATED = "kube-scheduler-most-allocated"
KUBE_EXTENDER = "kube-scheduler+drs"
DRS = "drs"
KUBE_SCHEDULER_NAME = "default-scheduler"
DRS_SCHEDULER_NAME = "drs-scheduler"
DRS_CLI = (sys.executable, "-c", "from drs_prom.cli import main; main()")


REBALANCE = "rebalance"
DESCHEDULER = "descheduler"
REBALANCERS = (REBALANCE, DESCHEDULER)
"""What may follow a scheduler's name after ``+``: ``drs-prom rebalance`` or the real descheduler beside it
(drs_prom.testbed.rebalancers)."""


def split_rebalancer(name: str) -> tuple[str, str | None]:
    """``"kube-scheduler+descheduler"`` -> ``("kube-scheduler", "descheduler")``; a name without one -> (name, None)."""
    base, plus, tail = name.rpartition("+")
    if plus and tail in REBALANCERS:
        return base, tail
    return name, None


def known_schedulers() -> list[str]:
    from drs_prom.registry import DEVICE_HEURISTICS, HEURISTICS, STAGED, TEACHERS

    return [KUBE, KUBE_MOST_ALLOCATED, KUBE_EXTENDER, DRS, *STAGED, *HEURISTICS, *DEVICE_HEURISTICS, *TEACHERS]


def real_kube_scheduler(scheduler: str) -> bool:
    """Whether ``scheduler`` is the real kube-scheduler alone (no drs-prom process beside it)."""
    return scheduler in (KUBE, KUBE_MOST_ALLOCATED)


def parse_schedulers(text: str) -> list[str]:
    """Comma-separated scheduler names, each optionally with ``+rebalance`` or ``+descheduler`` (a rebalancer beside
    it: drs_prom.testbed.rebalancers); ConfigError naming an unknown one."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    known = known_schedulers()
    for n in names:
        if split_rebalancer(n)[0] not in known:
            extra = ", ".join(f"+{r}" for r in REBALANCERS)
            raise ConfigError(f"unknown scheduler {n!r}; known: {', '.join(known)} (each optionally with {extra})")
    if not names:
        raise ConfigError("--schedulers names no scheduler")
    return names


def scheduler_name_for(scheduler: str) -> str:
    """The ``spec.schedulerName`` pods get in a run of ``scheduler``."""
    return KUBE_SCHEDULER_NAME if real_kube_scheduler(scheduler) else DRS_SCHEDULER_NAME


def most_allocated_profile() -> dict[str, Any]:
    """The KubeSchedulerConfiguration (without its client) of a GPU cluster's kube-scheduler: the default profile
    with NodeResourcesFit scoring by ``MostAllocated`` over cpu (weight 1), memory (1) and ``nvidia.com/gpu`` (2, the
    weights Volcano's binpack plugin documents for GPUs), as the simulator's ``most-allocated-gpu`` scores
    (drs_prom.policies.device_fit). The scheduler skips a resource a pod does not request, so a pod without GPUs is
    packed by cpu and memory."""
    strategy = {
        "type": "MostAllocated",
        "resources": [
            {"name": "cpu", "weight": CPU_WEIGHT},
            {"name": "memory", "weight": MEMORY_WEIGHT},
            {"name": GPU, "weight": GPU_WEIGHT},
        ],
    }
    return {
        "profiles": [
            {
                "schedulerName": KUBE_SCHEDULER_NAME,
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}],
            }
        ]
    }


def second_scheduler_config(extender_url: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration (without its client and leader election) of the chart's second kube-scheduler
    with its default values, calling drs-prom's extender at ``extender_url`` over plain HTTP: one profile named
    like drs-prom's own scheduler, the extender for prioritize only (kube-scheduler's own filters decide
    feasibility), weight 5, node names only (the extender watches the nodes), ignorable, 2 s timeout."""
    extender = {
        "urlPrefix": extender_url,
        "prioritizeVerb": "prioritize",
        "weight": 5,
        "enableHTTPS": False,
        "nodeCacheCapable": True,
        "ignorable": True,
        "httpTimeout": "2s",
    }
    return {"profiles": [{"schedulerName": DRS_SCHEDULER_NAME}], "extenders": [extender]}


def metrics_ports_needed(scheduler: str, replicas: int = 1) -> int:
    """How many /metrics ports of drs-prom processes a run of ``scheduler`` has (0 for plain kube-scheduler)."""
    if real_kube_scheduler(scheduler):
        return 0
    return 1 if scheduler == KUBE_EXTENDER else replicas


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class RunningScheduler:
    """The processes of one scheduler under test."""

    name: str
    procs: list[ManagedProcess] = field(default_factory=list)
    metrics_urls: list[str] = field(default_factory=list)  # drs-prom /metrics, one per replica
    peak_rss: int = 0

    def sample_rss(self) -> int:
        now = sum(rss_bytes(p.pid) for p in self.procs if p.alive())
        self.peak_rss = max(self.peak_rss, now)
        return now

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop(grace=10)


def drs_config(
    workdir: Path,
    tag: str,
    prometheus_url: str,
    norm: Normalisation,
    scrape_seconds: float,
    leader_election: bool,
    model_path: str | None,
    port: int,
    lease: str = "",
    speed: float = 1.0,
) -> tuple[Path, str]:
    """The settings file of a drs-prom process of the run (its Prometheus, usage model, scheduler name, journal, on
    the testbed's time scale) and the base URL it serves /metrics on."""
    window = f"{max(1, round(4 * scrape_seconds * 1000))}ms"  # 4 scrapes, the documented minimum
    # the loop's time runs ``speed`` times faster than a cluster's: the usage model's time (how long a pod must be
    # seen to count fully) shrinks with it, and the stored usage of an owner is read again every two scrapes
    shipped = shipped_usage_model()
    usage_model = save_usage_model(
        replace(shipped, full_weight_seconds=shipped.full_weight_seconds / max(speed, 1e-9)),
        workdir / f"usage-{tag}.json",
    )
    cfg: dict[str, Any] = {
        "prometheus": {
            "url": prometheus_url,
            "timeout_seconds": 2.0,
            "window": window,
            "max_sample_age_seconds": max(3.0, 12 * scrape_seconds),
        },
        "normalisation": norm.model_dump(),
        "usage": {"refresh_seconds": max(0.5, 2 * scrape_seconds), "model_path": str(usage_model)},
        "retrain": {"model_store": str(workdir / "model-store")},
        "scheduler": {
            "scheduler_name": DRS_SCHEDULER_NAME,
            "metrics_listen": f"{LOOPBACK}:{port}",
            "leader_election": leader_election,
            "lease_namespace": "default",
            "lease_name": f"drs-testbed-{lease}",  # one Lease for all replicas of a run
            "lease_duration_seconds": 4.0,
            "renew_deadline_seconds": 3.0,
            "retry_period_seconds": 0.5,
            "state_refresh_seconds": max(0.2, scrape_seconds),
            "backoff_initial_seconds": 0.2,
            "backoff_max_seconds": 2.0,
            "journal_path": str(workdir / f"journal-{tag}.sqlite"),
            "settle_seconds": 0.0,
        },
    }
    if model_path:
        cfg["scheduler"]["model_path"] = model_path
    path = workdir / f"drs-{tag}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, f"http://{LOOPBACK}:{port}"


def start_scheduler(
    scheduler: str,
    cp: ControlPlane,
    workdir: Path,
    prometheus_url: str,
    norm: Normalisation,
    scrape_seconds: float,
    replicas: int = 1,
    model_path: str | None = None,
    metrics_ports: Sequence[int] = (),
    timeout: float = 300.0,
    speed: float = 1.0,
) -> RunningScheduler:
    """Start ``scheduler`` against ``cp``; returns once it is ready (/healthz).

    ``metrics_ports``: where drs-prom replicas (or the extender) serve /metrics, chosen before the
    run's Prometheus starts so that it scrapes them (``metrics_ports_needed``)."""
    ports = list(metrics_ports) or [free_port() for _ in range(metrics_ports_needed(scheduler, replicas))]
    assert cp.admin_kubeconfig is not None
    kc = str(cp.admin_kubeconfig)
    run = RunningScheduler(scheduler)
    try:
        if scheduler == KUBE:
            run.procs.append(cp.start_kube_scheduler(f"profiles: [{{schedulerName: {KUBE_SCHEDULER_NAME}}}]\n"))
            return run
        if scheduler == KUBE_MOST_ALLOCATED:
            run.procs.append(cp.start_kube_scheduler(yaml.safe_dump(most_allocated_profile())))
            return run
        if scheduler == KUBE_EXTENDER:
            port = ports[0]
            cfg_path, _ = drs_config(
                workdir, "extender", prometheus_url, norm, scrape_seconds, False, model_path, free_port(), speed=speed
            )
            ext = ManagedProcess(
                "drs-extender",
                [*DRS_CLI, "extender", "--listen", f"{LOOPBACK}:{port}", "--config", str(cfg_path), "--kubeconfig", kc],
                workdir / "drs-extender.log",
            )
            run.procs.append(ext)
            run.metrics_urls.append(f"http://{LOOPBACK}:{port}")  # its /metrics beside /filter and /prioritize
            wait_http(ext, f"http://{LOOPBACK}:{port}/healthz", lambda b: True, timeout, error=ControlPlaneError)
            kcfg = second_scheduler_config(f"http://{LOOPBACK}:{port}")
            run.procs.append(cp.start_kube_scheduler(yaml.safe_dump(kcfg)))
            return run
        policy_args: Sequence[str] = () if scheduler == DRS else ("--policy", scheduler)
        for i in range(replicas):
            tag = f"{scheduler}-{i}"
            cfg_path, url = drs_config(
                workdir,
                tag,
                prometheus_url,
                norm,
                scrape_seconds,
                replicas > 1,
                model_path if scheduler == DRS else None,
                ports[i],
                lease=workdir.name,
                speed=speed,
            )
            proc = ManagedProcess(
                f"drs-prom-{tag}",
                [*DRS_CLI, "run", "--config", str(cfg_path), "--kubeconfig", kc, *policy_args],
                workdir / f"drs-prom-{tag}.log",
            )
            run.procs.append(proc)
            run.metrics_urls.append(url)
        for proc, url in zip(run.procs, run.metrics_urls):
            wait_http(proc, f"{url}/healthz", lambda b: True, timeout, error=ControlPlaneError)
        return run
    except BaseException:
        run.stop()
        raise
