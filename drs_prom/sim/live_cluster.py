"""A simulated cluster whose nodes a real Prometheus can scrape (node_exporter format).

``LiveCluster`` runs the simulator against the wall clock (``speed`` simulated seconds
per wall second). Pods get onto nodes either from outside (``bind``: an end-to-end test
mirrors what a real scheduler bound) or by replaying a whole scenario episode decided
by a policy (``LiveCluster.replay``). State advances lazily to "now" whenever it is
read or changed, so no thread ticks in the background.

``SimExporter`` publishes each node through exporters/node_exporter.py's
``NodeCollector`` (same names, labels, ``nodename``): one port per node (``mode="ports"``)
or one port with ``/nodes/<name>/metrics`` paths (``mode="paths"``, for many nodes);
``scrape_config()`` gives the matching Prometheus job. Counters are the simulator's exact
load integrals divided by ``speed``, so they are monotonic and ``rate()`` over wall time
equals the simulated rates even when the simulation runs accelerated. ``pod_counters`` gives the same per pod,
for the testbed's twin kubelets to serve as cAdvisor series (drs_prom.testbed.cadvisor).

Over 400 lines because every reading (node counters, pod counters, features) must take the cluster's one lock and
catch its lazy clock up first; the exporter and ``serve_scenario`` beside it are those readings' only servers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import numpy as np
from prometheus_client import CollectorRegistry

from drs_prom.errors import ConfigError
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import Policy
from drs_prom.sim.cluster import Cluster, Nodes
from drs_prom.sim.env import EpisodeResult, SchedulingEnv
from drs_prom.sim.page_server import serve_pages
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import Workload
from exporters.node_exporter import NodeCollector, NodeCounters, build_registry, multi_node_app


@dataclass(frozen=True)
class ScheduledBind:
    t: float  # simulated seconds
    name: str
    node: int
    demand: tuple[float, ...]
    work: float
    cpu_m: int
    mem_bytes: int
    factor: np.ndarray | None = None  # (K + 1, N_FEATURES) on demand between the usage changes; None: constant


class LiveCluster:
    """The simulator on a wall clock. Thread-safe; every public call first catches up to now."""

    def __init__(
        self,
        scenario: Scenario,
        speed: float = 1.0,
        slots: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        usage_times: np.ndarray | None = None,
    ) -> None:
        """``usage_times``: when pods' usage changes (simulated seconds since the start, a drifting workload's
        ``Workload.usage_times``); a pod bound with a ``factor`` then uses its demand times the factor of the span it
        is in, as the simulator runs that workload (drs_prom.sim.drift)."""
        if speed <= 0:
            raise ConfigError("speed must be positive")
        self.scenario = scenario
        self.speed = float(speed)
        self.nodes = Nodes.from_scenario(scenario)
        self.clock = clock
        n_slots = int(slots)
        self._wl = Workload(
            names=tuple(f"slot-{i}" for i in range(n_slots)),
            profiles=("external",) * n_slots,
            arrival=np.zeros(n_slots),
            work=np.ones(n_slots),
            demand=np.zeros((n_slots, N_FEATURES)),
            cpu_m=np.zeros(n_slots, dtype=np.int64),
            mem_bytes=np.zeros(n_slots, dtype=np.int64),
            node_selector=({},) * n_slots,
        )
        if usage_times is not None:
            times = np.asarray(usage_times, dtype=np.float64)
            self._wl = replace(self._wl, usage_times=times, usage_factor=np.ones((n_slots, len(times) + 1, N_FEATURES)))
        self.cluster = Cluster(self.nodes, self._wl, metric_window=0.0)
        self.cluster.finish[:] = 0.0  # every slot starts free
        self.pod_names: dict[int, str] = {}
        self._schedule: list[ScheduledBind] = []
        self._finished: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()
        self._t0 = clock()
        self.expected: EpisodeResult | None = None  # set by replay(): what SchedulingEnv measured for the episode

    # --- time --------------------------------------------------------------------------
    @property
    def sim_time(self) -> float:
        with self._lock:
            self._catch_up()
            return self.cluster.t

    def _target(self) -> float:
        return (self.clock() - self._t0) * self.speed

    def _run_to(self, t: float) -> None:
        c = self.cluster
        while c.t < t - 1e-12:
            for slot in c.advance(t).tolist():
                name = self.pod_names.get(int(slot))
                if name is not None:
                    self._finished.append((name, float(c.start[slot]), float(c.finish[slot])))

    def _catch_up(self) -> None:
        target = self._target()
        while self._schedule and self._schedule[0].t <= target:
            b = self._schedule.pop(0)
            self._run_to(b.t)
            self._bind_now(b)
        self._run_to(target)

    # --- pods --------------------------------------------------------------------------
    def node_index(self, node: int | str) -> int:
        if isinstance(node, str):
            try:
                return self.nodes.names.index(node)
            except ValueError:
                raise ConfigError(f"unknown simulated node {node!r}") from None
        if not 0 <= node < len(self.nodes):
            raise ConfigError(f"node index {node} out of range")
        return int(node)

    def bind(
        self,
        name: str,
        node: int | str,
        demand: Sequence[float],
        work_seconds: float,
        cpu_m: int = 0,
        mem_bytes: int = 0,
        factor: np.ndarray | None = None,
    ) -> None:
        """Start a pod on ``node`` now: ``demand`` in absolute FEATURES units, ``work_seconds`` at full speed,
        ``factor`` its usage profile over the cluster's ``usage_times`` (ignored without them)."""
        with self._lock:
            self._catch_up()
            self._bind_now(
                ScheduledBind(
                    self.cluster.t,
                    name,
                    self.node_index(node),
                    tuple(float(x) for x in demand),
                    float(work_seconds),
                    int(cpu_m),
                    int(mem_bytes),
                    factor,
                )
            )

    def bind_profile(self, name: str, node: int | str, profile: str) -> None:
        """Start a pod of one of the scenario's profiles (mean work) on ``node`` now."""
        prof = self.scenario.profiles.get(profile)
        if prof is None:
            raise ConfigError(f"unknown profile {profile!r}; scenario has {', '.join(self.scenario.profiles)}")
        self.bind(
            name, node, prof.demand.vector(), prof.work_seconds, int(prof.requests.cpu_m), int(prof.requests.mem_bytes)
        )

    def _bind_now(self, b: ScheduledBind) -> None:
        c, wl = self.cluster, self._wl
        free = np.flatnonzero(~np.isnan(c.finish))
        if not len(free):
            raise ConfigError(f"all {len(wl)} simulated pod slots are busy")
        slot = int(free[0])
        wl.demand[slot] = b.demand
        wl.work[slot] = max(b.work, 1e-6)
        wl.arrival[slot] = c.t
        wl.cpu_m[slot] = b.cpu_m
        wl.mem_bytes[slot] = b.mem_bytes
        if wl.usage_factor is not None:
            wl.usage_factor[slot] = 1.0 if b.factor is None else b.factor
        c.node_of[slot] = -1
        c.remaining[slot] = wl.work[slot]
        c.pod_cum[slot] = 0.0  # a reused slot's counters start from zero, as a new container's do
        c.finish[slot] = np.nan
        c.bind(slot, b.node)
        self.pod_names[slot] = b.name

    def evict(self, name: str) -> float | None:
        """Take running pod ``name`` off its node now (an eviction: it stops using anything and frees its slot);
        returns the full-speed work it had left (simulated seconds), or None when it is not running (it ended)."""
        with self._lock:
            self._catch_up()
            c = self.cluster
            slot = next((s for s, n in self.pod_names.items() if n == name), None)
            if slot is None or slot not in c.running:
                return None
            c.evict(slot)
            left = float(c.remaining[slot])
            c.finish[slot] = c.t  # the slot is free again; nothing is reported as finished
            del self.pod_names[slot]
            return left

    def pop_finished(self) -> list[tuple[str, float, float]]:
        """Pods completed since the last call: (name, simulated start, simulated finish), in order."""
        with self._lock:
            self._catch_up()
            done, self._finished = self._finished, []
            return done

    def wall_time(self, sim_t: float) -> float:
        """The clock reading at which simulated time ``sim_t`` is (or was) reached."""
        return self._t0 + sim_t / self.speed

    def running(self) -> dict[str, str]:
        """Running pod name -> node name."""
        with self._lock:
            self._catch_up()
            c = self.cluster
            return {self.pod_names[int(i)]: self.nodes.names[int(c.node_of[i])] for i in c.running}

    @classmethod
    def replay(
        cls,
        scenario: Scenario,
        policy: Policy,
        seed: int = 0,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> LiveCluster:
        """Decide a whole episode with ``policy`` in SchedulingEnv, then replay its binds on the wall clock."""
        env = SchedulingEnv(scenario, seed=seed)
        binds: list[tuple[float, str, int]] = []
        env.run(policy, seed=seed, on_step=lambda info: binds.append((info.t, info.pod, info.node_index)))
        wl = env.workload
        index = {name: i for i, name in enumerate(wl.names)}
        live = cls(scenario, speed=speed, slots=max(64, len(wl)), clock=clock, usage_times=wl.usage_times)
        factors = wl.usage_factor
        live._schedule = [
            ScheduledBind(
                t,
                name,
                node,
                tuple(wl.demand[index[name]]),
                float(wl.work[index[name]]),
                int(wl.cpu_m[index[name]]),
                int(wl.mem_bytes[index[name]]),
                None if factors is None else factors[index[name]],
            )
            for t, name, node in binds
        ]
        live.expected = env.result(policy.name)
        return live

    # --- what an exporter reads ------------------------------------------------------------
    def counters(self, node: int) -> NodeCounters:
        """node_exporter-style cumulative counters of one node (exporters.node_exporter.NodeCounters)."""
        with self._lock:
            self._catch_up()
            c = self.cluster
            cum = c.cum[node].copy()
            t = c.t
            used_mem = float(c.used()[node, 1])
        cap = self.nodes.capacity[node]
        k = max(1, math.ceil(cap[0] - 1e-9))
        busy = cum[0] / k  # core-seconds busy per CPU
        s = 1.0 / self.speed
        per_cpu = {
            "user": 0.85 * busy * s,
            "nice": 0.0,
            "system": 0.15 * busy * s,
            "idle": max(0.0, t - busy) * s,
            "iowait": 0.0,
            "irq": 0.0,
            "softirq": 0.0,
            "steal": 0.0,
        }
        return NodeCounters(
            cpu_seconds={str(i): per_cpu for i in range(k)},
            memory_total_bytes=float(cap[1]),
            memory_available_bytes=max(0.0, float(cap[1]) - used_mem),
            net_receive_bytes={"eth0": cum[2] * s},
            net_transmit_bytes={"eth0": cum[3] * s},
            disk_read_bytes={"sda": cum[4] * s},
            disk_written_bytes={"sda": cum[5] * s},
            uname={
                "sysname": "Linux",
                "release": "drs-prom-sim",
                "version": "#1",
                "machine": "x86_64",
                "domainname": "(none)",
            },
        )

    def pod_counters(self, node: int) -> dict[str, np.ndarray]:
        """The pods running on ``node`` now: name -> what their cAdvisor series read, in FEATURES order: CPU
        core-seconds, network and disk bytes as counters (``Cluster.pod_cum`` divided by ``speed``, as ``counters``)
        and the memory the pod holds now in bytes (its demand now, its usage profile's where it drifts: memory is
        held, not throttled)."""
        with self._lock:
            self._catch_up()
            c = self.cluster
            slots = c.running[c.node_of[c.running] == node]
            values = c.pod_cum[slots] / self.speed
            values[:, 1] = c.demand_now(slots)[:, 1]
            return {self.pod_names[int(s)]: v for s, v in zip(slots.tolist(), values)}

    def features(self) -> np.ndarray:
        """Instantaneous raw FEATURES per node (cpu/mem fractions, byte rates) — what rate() should approach."""
        with self._lock:
            self._catch_up()
            return self.cluster.raw_features(self.cluster.used())


class SimExporter:
    """HTTP endpoints for every node of a LiveCluster, on 127.0.0.1 by default."""

    def __init__(
        self, live: LiveCluster, mode: Literal["ports", "paths"] = "ports", host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if mode not in ("ports", "paths"):
            raise ConfigError(f"mode must be 'ports' or 'paths', got {mode!r}")
        self.live, self.mode, self.host, self.port = live, mode, host, port
        self._servers: list[tuple[Any, threading.Thread]] = []
        self.targets: dict[str, str] = {}  # node name -> host:port
        self.paths: dict[str, str] = {}  # node name -> metrics path

    def _registry(self, i: int) -> CollectorRegistry:
        return build_registry(NodeCollector(partial(self.live.counters, i), node_name=self.live.nodes.names[i]))

    def _serve(self, port: int, app: Callable[..., Any], name: str) -> tuple[Any, threading.Thread]:
        """``app`` on ``self.host:port`` by a bounded number of threads (drs_prom.sim.page_server).

        Pages go out uncompressed: Prometheus scrapes these targets on this host, where gzipping every page of
        every node at every scrape only spends the CPU that the scheduler under test and the control plane share
        with this process."""
        return serve_pages(self.host, port, app, name)

    def _node_app(self, i: int) -> Callable[..., Any]:
        from prometheus_client import make_wsgi_app

        return make_wsgi_app(self._registry(i), disable_compression=True)

    def start(self) -> SimExporter:
        names = self.live.nodes.names
        try:
            if self.mode == "ports":
                for i, name in enumerate(names):
                    httpd, thread = self._serve(
                        self.port if self.port and i == 0 else 0, self._node_app(i), f"sim-exporter-{name}"
                    )
                    self._servers.append((httpd, thread))
                    self.targets[name] = f"{self.host}:{httpd.server_port}"
                    self.paths[name] = "/metrics"
            else:
                self._start_paths(names)
        except OSError as exc:
            self.stop()
            raise ConfigError(f"cannot listen on {self.host}: {exc.strerror or exc}") from None
        return self

    def _start_paths(self, names: Sequence[str]) -> None:
        registries = {name: self._registry(i) for i, name in enumerate(names)}
        httpd, thread = self._serve(self.port, multi_node_app(registries.get, disable_compression=True), "sim-exporter")
        self._servers.append((httpd, thread))
        for name in names:
            self.targets[name] = f"{self.host}:{httpd.server_port}"
            self.paths[name] = f"/nodes/{name}/metrics"

    def stop_node(self, name: str) -> None:
        """Ports mode: stop serving one node (its exporter is down; Prometheus sees the target fail)."""
        if self.mode != "ports":
            raise ConfigError("stopping one node's exporter needs mode='ports'")
        i = self.live.node_index(name)
        httpd, thread = self._servers[i]
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    def restart_node(self, name: str) -> None:
        """Ports mode: serve a stopped node again on the same address."""
        i = self.live.node_index(name)
        port = int(self.targets[name].rsplit(":", 1)[1])
        self._servers[i] = self._serve(port, self._node_app(i), f"sim-exporter-{name}")

    def scrape_config(self, job: str = "node", interval: str | None = None) -> dict[str, Any]:
        """A Prometheus ``scrape_configs`` entry: one target per node, ``instance`` = node name."""
        cfg: dict[str, Any] = {
            "job_name": job,
            "static_configs": [
                {"targets": [self.targets[n]], "labels": {"instance": n, "__metrics_path__": self.paths[n]}}
                for n in self.live.nodes.names
            ],
        }
        if interval:
            cfg["scrape_interval"] = interval
        return cfg

    def stop(self) -> None:
        for httpd, thread in self._servers:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)
        self._servers.clear()

    def __enter__(self) -> SimExporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_scenario(
    scenario: Scenario,
    policy: Policy,
    seed: int = 0,
    speed: float = 1.0,
    mode: Literal["ports", "paths"] = "ports",
    host: str = "127.0.0.1",
    port: int = 0,
    stop: threading.Event | None = None,
    echo: Callable[[str], None] = print,
) -> None:
    """Replay one decided episode on the wall clock and serve it until SIGINT/SIGTERM (or ``stop``)."""
    import signal

    import yaml

    live = LiveCluster.replay(scenario, policy, seed=seed, speed=speed)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    makespan = live.expected.makespan if live.expected is not None else math.nan
    with SimExporter(live, mode=mode, host=host, port=port) as exporter:
        echo(
            f"serving {len(live.nodes)} simulated nodes of {scenario.name} (policy {policy.name}, seed {seed}, "
            f"speed {speed:g}x); episode ends at simulated {makespan:.0f} s. Prometheus job:"
        )
        echo(yaml.safe_dump({"scrape_configs": [exporter.scrape_config("node")]}, sort_keys=False).rstrip())
        while not stop.wait(1.0):
            pass
