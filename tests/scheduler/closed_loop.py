"""A closed loop for the rollout tests until drs_prom/testbed lands on main: the real
kube-apiserver (fake nodes, no kubelet), simulated nodes (drs_prom.sim.live_cluster.LiveCluster)
whose node_exporter-format metrics a real Prometheus scrapes, and the scheduler, whose
binds are mirrored into the simulation (the scheduler's ``recorder`` hook) so that its
placements change the metrics it reads next. Prometheus also scrapes the scheduler's own
/metrics (job ``drs-scheduler``), as deploy/prometheus does.

Tiny Keras models are written with the project's persistence (save_model + metadata):
``linear_model(column, sign)`` scores each node by ``sign * candidate[column]``; with
``after_0`` and +1 it always prefers the node with the most CPU load after the pod (it
piles everything onto one node), with ``dstd_0`` and -1 it balances.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS
from drs_prom.agent.persistence import base_metadata, save_model
from drs_prom.config import Normalisation, PrometheusSettings
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.live_cluster import LiveCluster, SimExporter
from drs_prom.sim.scenario import load_scenario
from tests.prom.fixtures import PrometheusProc, free_port, start_prometheus, wait_until
from tests.scheduler.conftest import list_pods, pod_body

WORK_SECONDS = 10_000.0  # pods run for the whole test


def linear_model(path: Path, column: str, sign: float) -> Path:
    """A 2-unit ReLU network computing ``sign * x[column]`` exactly, saved as a drs model."""
    from drs_prom.agent.networks import configure_tf

    configure_tf()
    import keras

    col = CANDIDATE_COLUMNS.index(column)
    inp = keras.Input(shape=(len(CANDIDATE_COLUMNS),), name="candidate")
    hidden = keras.layers.Dense(2, activation="relu", name="hidden_0")(inp)
    q = keras.layers.Dense(1, name="q")(hidden)
    model = keras.Model(inp, q)
    k = np.zeros((len(CANDIDATE_COLUMNS), 2), dtype=np.float32)
    k[col, 0], k[col, 1] = 1.0, -1.0  # relu(x) - relu(-x) == x
    model.get_layer("hidden_0").set_weights([k, np.zeros(2, np.float32)])
    model.get_layer("q").set_weights([np.array([[sign], [-sign]], np.float32), np.zeros(1, np.float32)])
    return save_model(model, base_metadata("drs", Normalisation()), path)


def piling_model(path: Path) -> Path:
    return linear_model(path, "after_0", 1.0)


def balancing_model(path: Path) -> Path:
    return linear_model(path, "dstd_0", -1.0)


class Mirror:
    """The scheduler's ``recorder``: every bind also starts the pod on the simulated node."""

    def __init__(self, live: LiveCluster) -> None:
        self.live = live
        self.bound: dict[str, str] = {}

    def record(self, req: Any, demand: tuple[float, ...], node: str, names: list[str]) -> None:
        self.live.bind(req.name, node, demand, WORK_SECONDS, int(req.cpu_m), int(req.mem_bytes))
        self.bound[req.name] = node

    def stop(self) -> None:
        pass


@dataclass
class Loop:
    live: LiveCluster
    exporter: SimExporter
    prom: PrometheusProc
    source: PrometheusSource
    metrics_port: int
    nodes: tuple[str, ...]
    mirror: Mirror
    created: list[str] = field(default_factory=list)

    def overrides(self, **rollout: Any) -> dict[str, Any]:
        """make_scheduler overrides: the reserved /metrics port, short windows, the rollout section."""
        out: dict[str, Any] = {
            "scheduler.metrics_listen": f"127.0.0.1:{self.metrics_port}",
            "prometheus.url": self.prom.url,
            "prometheus.window": "5s",
        }
        for key, value in rollout.items():
            out[f"rollout.{key}"] = value
        return out

    def query(self, expr: str) -> float | None:
        return self.source.scalar(expr)

    def create(self, core: Any, ns: str, name: str, cpu: str = "100m", **meta: Any) -> None:
        core.create_namespaced_pod(ns, pod_body(name, cpu=cpu, mem="64Mi", metadata=meta), _preload_content=False)
        self.created.append(name)

    def feed(
        self, core: Any, ns: str, prefix: str, per_second: float, stop: threading.Event, limit: int, cpu: str = "100m"
    ) -> None:
        """Create pods at a steady rate until ``stop`` or ``limit`` (run in a thread)."""
        i = 0
        while not stop.is_set() and i < limit:
            self.create(core, ns, f"{prefix}{i:03d}", cpu=cpu)
            i += 1
            stop.wait(1.0 / per_second)

    def all_bound(self, core: Any, ns: str) -> dict[str, str] | None:
        got = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in list_pods(core, ns)}
        return got if len(got) == len(self.created) and all(got.values()) else None


def start_loop(tmp_path: Path, fake_nodes: Callable[..., str]) -> Iterator[Loop]:
    """Generator for a fixture: the sim, its exporters, Prometheus and the matching fake nodes."""
    live = LiveCluster(load_scenario("drs-paper"), speed=1.0)
    names = tuple(live.nodes.names)
    for n in names:  # same size as the simulated nodes: 4 cores, so 40 pods of 100m fit each
        fake_nodes(n, cpu="4", memory="16Gi", pods="110")
    exporter = SimExporter(live).start()
    port = free_port()
    prom = None
    source = None
    try:
        sched_job = {"job_name": "drs-scheduler", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        prom = start_prometheus(
            tmp_path / "prom",
            extra_config={"scrape_configs": [exporter.scrape_config("node"), sched_job]},
            scrape_interval="1s",
        )
        source = PrometheusSource(
            PrometheusSettings(url=prom.url, window="5s", max_sample_age_seconds=10, timeout_seconds=3),
            expected_nodes=lambda: names,
        )
        wait_until(lambda: len(source.snapshot().fresh()) == len(names), 30, "fresh metrics for every simulated node")
        yield Loop(live, exporter, prom, source, port, names, Mirror(live))
    finally:
        if source is not None:
            source.close()
        if prom is not None:
            prom.stop()
        exporter.stop()


def wait_rate(seconds: float) -> None:
    """Let at least one rate window of samples reflect the current placements."""
    time.sleep(seconds)
