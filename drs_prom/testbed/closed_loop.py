"""One closed-loop run per (scheduler, seed) on one control plane, and the report over them.

A ``Testbed`` owns the control plane and the fake nodes (built once from the scenario's node types). ``run_one``
gives each scheduler a clean stage: a new namespace, a new simulated cluster (LiveCluster + sim-serve exporter + the
twin kubelets' cAdvisor pages), a new Prometheus scraping them (and the drs-prom processes' /metrics) with the
project's recording rules, the scheduler's own processes, the twin kubelet and the workload driver; all of it is
stopped and the run's pods deleted before the next run, also when the run fails or is interrupted. The pods' true
demand and work reach the twin kubelet and the judge in process, by pod name: unless the run is told
(``RunConfig.told_usage``) nothing on a pod says its usage, and the run fails if one did (``driver.UsageLeak``).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from drs_prom.errors import ConfigError
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.signals import link_capacity, promql
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.live_cluster import LiveCluster, SimExporter
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import Workload, generate
from drs_prom.testbed import disruption_budgets, zonal_claims
from drs_prom.testbed.cadvisor import KUBELET_JOB, CadvisorExporter
from drs_prom.testbed.controlplane import TESTBED_TAINT, ControlPlane
from drs_prom.testbed.driver import RUN_LABEL, WorkloadDriver
from drs_prom.testbed.heartbeat import NodeHeartbeat
from drs_prom.testbed.kubelet import TwinKubelet
from drs_prom.testbed.pod_owners import pod_owners
from drs_prom.testbed.process import free_port
from drs_prom.testbed.prom_server import PrometheusProc, start_prometheus, wait_until
from drs_prom.testbed.rebalancers import RunningRebalancer, scaled_settings, start_for_run
from drs_prom.testbed.replacements import Replacements
from drs_prom.testbed.run_context import RunConfig, RunContext
from drs_prom.testbed.run_verdict import judge_run
from drs_prom.testbed.schedulers import (
    RunningScheduler,
    metrics_ports_needed,
    rss_bytes,
    scheduler_name_for,
    split_rebalancer,
    start_scheduler,
)

log = logging.getLogger(__name__)


DRS_METRICS_JOB = "drs-scheduler"


FaultScript = Callable[[RunContext], dict[str, Any]]


def workload_for(scenario: Scenario, seed: int, pods: int | None) -> Workload:
    sc = scenario.truncated(pods) if pods else scenario
    return generate(sc, seed)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40]


class Testbed:
    """Control plane + fake nodes for one scenario; ``run_one`` per scheduler and seed."""

    def __init__(
        self,
        scenario: Scenario,
        workdir: Path,
        config: RunConfig,
        progress: Callable[[str], None],
        kubeconfig: str | None = None,
    ) -> None:
        """``kubeconfig``: run on that cluster (fake nodes tainted, Lease heartbeats, everything created
        there deleted at the end) instead of starting etcd + kube-apiserver on loopback."""
        self.scenario = scenario
        self.kubeconfig = kubeconfig
        self.heartbeat: NodeHeartbeat | None = None
        self.nodes = Nodes.from_scenario(scenario)
        self.workdir = Path(workdir)
        self.config = config
        self.progress = progress
        self.cp: ControlPlane | None = None
        self._runs = 0

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cp = ControlPlane(workdir_parent=self.workdir, external_kubeconfig=self.kubeconfig)
        t0 = time.monotonic()
        self.cp.start()
        what = "cluster from --kubeconfig" if self.kubeconfig else "control plane up"
        self.progress(f"{what} in {time.monotonic() - t0:.1f}s at {self.cp.server}")
        t0 = time.monotonic()
        self._create_nodes()
        self.progress(f"{len(self.nodes)} fake nodes created in {time.monotonic() - t0:.1f}s")
        if self.kubeconfig:
            self.heartbeat = NodeHeartbeat(self.api, self.nodes.names)
            self.heartbeat.start()

    def stop(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
        if self.cp is not None:
            self.cp.stop()
            self.cp = None

    def _create_nodes(self) -> None:
        assert self.cp is not None
        nd = self.nodes

        def make(i: int) -> None:
            assert self.cp is not None
            taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in nd.taints[i]]
            self.cp.create_fake_node(
                nd.names[i],
                cpu=f"{int(nd.alloc_cpu_m[i])}m",
                memory=str(int(nd.alloc_mem[i])),
                pods=str(int(nd.alloc_pods[i])),
                labels={**nd.labels[i], **link_capacity.labels_for(nd.capacity[i, 2:])},
                taints=taints or None,
                extra_resources={k: str(int(v[i])) for k, v in nd.alloc_scalar.items() if v[i]} or None,
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(len(nd))))

    @property
    def api(self) -> Any:
        assert self.cp is not None
        return self.cp.admin_client

    # -- one run -------------------------------------------------------------------------
    def run_one(
        self, scheduler: str, seed: int, wl: Workload, fault_script: FaultScript | None = None
    ) -> dict[str, Any]:
        assert self.cp is not None
        cfg = self.config
        self._runs += 1
        base, rebalancer = split_rebalancer(scheduler)
        ns = f"tb{self._runs}-{_slug(scheduler)}-s{seed}"
        rundir = self.workdir / ns
        rundir.mkdir(parents=True, exist_ok=True)
        self.cp.create_namespace(ns)
        slots = max(64, 2 * len(wl))
        live = LiveCluster(self.scenario, speed=cfg.speed, slots=slots, clock=time.time, usage_times=wl.usage_times)
        owners = pod_owners(wl)
        exporter = SimExporter(live, mode=cfg.exporter_mode).start()
        cadvisor: CadvisorExporter | None = None
        prom: PrometheusProc | None = None
        sched: RunningScheduler | None = None
        kubelet: TwinKubelet | None = None
        driver: WorkloadDriver | None = None
        rebal: RunningRebalancer | None = None
        replacements: Replacements | None = None
        t_wall0 = time.monotonic()
        try:
            cadvisor = CadvisorExporter(live).start()
            ports = [free_port() for _ in range(metrics_ports_needed(base, cfg.replicas))]
            prom = self._start_prometheus(rundir, [exporter.scrape_config("node"), cadvisor.scrape_config()], ports)
            sched = start_scheduler(
                base,
                self.cp,
                rundir,
                prom.url,
                self.scenario.norm,
                cfg.scrape_seconds,
                replicas=cfg.replicas,
                model_path=cfg.model_path,
                metrics_ports=ports,
                speed=cfg.speed,
            )
            marks, truth = TESTBED_TAINT if self.kubeconfig else None, owners.truth(wl)
            kubelet = TwinKubelet(
                self.api,
                ns,
                live,
                node_marks=marks,
                truth=truth,
                containers=cadvisor.containers,
                usage_factors=owners.usage_factors(wl),
            )
            kubelet.start()
            if not kubelet.watch.synced.wait(30):
                raise ConfigError("the twin kubelet's pod watch never synced")
            name, external, told = scheduler_name_for(base), self.kubeconfig is not None, cfg.told_usage
            driver = WorkloadDriver(
                self.api,
                wl,
                ns,
                name,
                cfg.speed,
                ns,
                external=external,
                told=told,
                owners=owners,
                hosts=self.nodes.names,
            )
            made: list[disruption_budgets.Budget] = []
            if rebalancer is not None:
                self._start_disruption_controller()
                made = disruption_budgets.budgets(owners, ns)
                disruption_budgets.create(self.api, ns, ns, made)
                replacements = Replacements(self.scenario, wl, owners, driver, kubelet)
                kubelet.on_evicted = replacements.on_evicted
                replacements.start()
                settings = scaled_settings(self.scenario, cfg.speed, ns)
                rebal = start_for_run(
                    rebalancer, self.cp, rundir, self.scenario.norm, cfg, settings, prom.url, external
                )
            driver.start()
            ctx = RunContext(self, ns, live, exporter, cadvisor, prom, sched, kubelet, driver, owners, time.time())
            ctx.replacements, ctx.rebalancer, ctx.budgets = replacements, rebalancer, made
            fault_thread: threading.Thread | None = None
            fault_result: dict[str, Any] = {}
            if fault_script is not None:
                fault_thread = threading.Thread(
                    target=lambda: fault_result.update(fault_script(ctx)), daemon=True, name="faults"
                )
                fault_thread.start()
            prom_rss = self._wait_done(ctx, wl, fault_thread)
            if fault_thread is not None:
                fault_thread.join(300)
            end = time.time() + 3 * cfg.scrape_seconds
            time.sleep(3 * cfg.scrape_seconds)
            return judge_run(scheduler, seed, ctx, wl, end, prom_rss, time.monotonic() - t_wall0, fault_result)
        finally:
            for part in (driver, rebal, replacements, kubelet, sched, prom, cadvisor):
                if part is not None:
                    try:
                        part.stop()
                    except Exception as exc:  # noqa: BLE001 - cleanup must go on with the next part
                        log.warning("stopping %s: %s", type(part).__name__, exc)
            exporter.stop()
            self._delete_pods(ns)

    def _start_disruption_controller(self) -> None:
        """The real disruption controller, once per testbed, for the budgets of runs with a rebalancer
        (drs_prom.testbed.disruption_budgets); a ``--kubeconfig`` cluster runs its own."""
        assert self.cp is not None
        if self.kubeconfig is None and not self.cp.controller_managers:
            self.cp.start_kube_controller_manager(("disruption-controller",))

    def _start_prometheus(self, rundir: Path, scrape: list[dict[str, Any]], drs_ports: list[int]) -> PrometheusProc:
        """Prometheus scraping the nodes and their kubelets' cAdvisor pages (``scrape``) and drs-prom's ports."""
        cfg = self.config
        interval = f"{max(1, round(cfg.scrape_seconds * 1000))}ms"
        if drs_ports:
            scrape.append(
                {
                    "job_name": DRS_METRICS_JOB,
                    "scrape_interval": "1s",  # counters only; a busy Python process may answer slower than 250 ms
                    "scrape_timeout": "1s",
                    "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in drs_ports]}],
                }
            )
        rules = rundir / "drs.rules.yml"  # the project's rules, the per-pod ones evaluated at every scrape: the
        rules.write_text(promql.rules_yaml(promql.RuleParams(usage_interval=interval)))  # pods live seconds here
        prom = start_prometheus(
            rundir / "prometheus", extra_config={"scrape_configs": scrape}, rule_files=[rules], scrape_interval=interval
        )
        n = len(self.nodes)
        try:
            wait_until(
                lambda: (
                    len(prom.query('count by (nodename) (node_uname_info{job="node"})')) == n
                    and len(prom.query(f'up{{job="{KUBELET_JOB}"}} == 1')) == n
                ),
                max(60.0, n / 5),  # one Python process serves every node's /metrics: slow at 1000 nodes
                f"all {n} simulated nodes and their kubelets' cAdvisor pages scraped",
            )
        except BaseException:
            prom.stop()
            raise
        return prom

    def _wait_done(self, ctx: RunContext, wl: Workload, fault_thread: threading.Thread | None) -> int:
        """Until every pod the driver created is Succeeded or Failed (or the deadline); returns Prometheus' peak RSS."""
        cfg = self.config
        horizon = (float(wl.arrival[-1]) + 3 * float(wl.work.max())) / cfg.speed
        deadline = time.monotonic() + cfg.deadline_factor * horizon + 120
        peak_prom = 0
        n = len(wl)
        while time.monotonic() < deadline:
            ctx.sched.sample_rss()
            peak_prom = max(peak_prom, rss_bytes(ctx.prom.pid))
            st = ctx.kubelet.stats
            driver_done = not ctx.driver.is_alive()
            created = len(ctx.driver.result.created) + len(ctx.driver.result.errors)
            faults_done = fault_thread is None or not fault_thread.is_alive()
            ended = st.completed + len(st.infeasible) + len(st.evicted)  # an evicted pod ended; its replacement is new
            replaced = ctx.replacements is None or ctx.replacements.idle()
            all_ended = ended >= len(ctx.driver.result.created) and replaced
            if driver_done and created >= n and all_ended and faults_done and ctx.kubelet.pending_writes() == 0:
                return peak_prom
            time.sleep(0.25)
        log.warning("run %s: deadline reached before every pod completed", ctx.namespace)
        return peak_prom

    def _delete_pods(self, ns: str) -> None:
        """The run's pods, and its claims and volumes (PersistentVolumes are cluster-scoped: no namespace holds them)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        for _ in range(3):
            try:
                drained(core.delete_collection_namespaced_pod(ns, grace_period_seconds=0, _preload_content=False))
                zonal_claims.delete_run_volumes(core, ns, f"{RUN_LABEL}={ns}")
                return
            except Exception as exc:  # noqa: BLE001 - the apiserver may be restarting after a fault
                log.warning("deleting the pods of %s: %s", ns, exc)
                time.sleep(1)


def nan_mean(values: list[float]) -> float:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan
