"""What one closed-loop run is given (``RunConfig``) and what it is made of while it goes (``RunContext``): the parts a
fault script acts on and the verdict reads (drs_prom.testbed.run_verdict). Apart from drs_prom.testbed.closed_loop,
which runs them, so that the modules beside it need not import the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from drs_prom.sim.cluster import Nodes
from drs_prom.sim.live_cluster import LiveCluster, SimExporter
from drs_prom.sim.scenario import Scenario
from drs_prom.testbed.cadvisor import CadvisorExporter
from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.disruption_budgets import Budget
from drs_prom.testbed.driver import WorkloadDriver
from drs_prom.testbed.kubelet import TwinKubelet
from drs_prom.testbed.pod_owners import PodOwners
from drs_prom.testbed.prom_server import PrometheusProc
from drs_prom.testbed.replacements import Replacements
from drs_prom.testbed.schedulers import RunningScheduler


@dataclass
class RunConfig:
    speed: float = 10.0
    scrape_seconds: float = 0.25
    exporter_mode: str = "ports"  # "paths" for many nodes
    model_path: str | None = None
    replicas: int = 1
    deadline_factor: float = 4.0  # give up waiting for completions after this x the expected wall time
    told_usage: bool = False  # annotate every pod with drs.io/demand (the told regime); else nothing says usage


class TestbedParts(Protocol):
    """What a run's testbed offers its fault script and its verdict (closed_loop.Testbed)."""

    scenario: Scenario
    nodes: Nodes
    config: RunConfig
    cp: ControlPlane | None

    @property
    def api(self) -> Any: ...


@dataclass
class RunContext:
    """What a fault script may act on during a run."""

    testbed: TestbedParts
    namespace: str
    live: LiveCluster
    exporter: SimExporter
    cadvisor: CadvisorExporter
    prom: PrometheusProc
    sched: RunningScheduler
    kubelet: TwinKubelet
    driver: WorkloadDriver
    owners: PodOwners  # the pods' names on the apiserver and their owners
    started: float
    notes: dict[str, Any] = field(default_factory=dict)
    replacements: Replacements | None = None  # the pods' controllers' stand-in, in a run with a rebalancer
    rebalancer: str | None = None
    budgets: list[Budget] = field(default_factory=list)  # the PodDisruptionBudgets of a run with a rebalancer
