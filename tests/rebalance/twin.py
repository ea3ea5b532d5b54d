"""Node and pod metrics the test sets, served under node_exporter's and the kubelet's cAdvisor names.

The fake nodes of the harness have no kubelet and no machine behind them: something must say how busy they are.
``MetricsTwin`` is that something, as the testbed's twin kubelets are for its simulated nodes: the test sets each
pod's usage (cores, bytes, bytes/s) and each node's load outside the pods, and the twin integrates them over wall
time into the counters a real node_exporter and kubelet serve (exporters.node_exporter.NodeCollector,
drs_prom.testbed.cadvisor.CadvisorCollector), on one loopback port. A real Prometheus scrapes them; everything the
rebalancer reads goes through it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.testbed.cadvisor import CadvisorCollector, Container, Containers
from exporters.node_exporter import NodeCollector, NodeCounters, build_registry

CPUS = 8
MEM = 32 * 2**30


@dataclass
class _Pod:
    node: str
    usage: np.ndarray
    cum: np.ndarray = field(default_factory=lambda: np.zeros(N_FEATURES))


@dataclass
class _Node:
    extra: np.ndarray = field(default_factory=lambda: np.zeros(N_FEATURES))
    """Load outside the pods (cores, bytes, bytes/s)."""
    busy: float = 0.0
    net: np.ndarray = field(default_factory=lambda: np.zeros(4))


class MetricsTwin:
    def __init__(self, nodes: list[str]) -> None:
        self.nodes = {n: _Node() for n in nodes}
        self.pods: dict[str, _Pod] = {}
        self.containers = Containers()
        self.lock = threading.Lock()
        self.t = time.monotonic()
        self.boot = time.time() - 1000.0  # counters since "boot"
        self._server: tuple[Any, threading.Thread] | None = None
        self.address = ""

    # -- what the test sets ------------------------------------------------------------------

    def add_pod(self, namespace: str, name: str, node: str, cores: float, mem: float = 2**30) -> None:
        with self.lock:
            self._tick()
            self.pods[name] = _Pod(node, np.array([cores, mem, 1e5, 1e5, 1e4, 1e4]))
        self.containers.add(Container(namespace, name, "c", "registry.k8s.io/pause:3.10"))

    def remove_pod(self, name: str) -> None:
        with self.lock:
            self._tick()
            self.pods.pop(name, None)
        self.containers.remove(name)

    def set_pod(self, name: str, cores: float) -> None:
        with self.lock:
            self._tick()
            self.pods[name].usage[0] = cores

    def set_extra(self, node: str, cores: float) -> None:
        """Load on ``node`` no pod of the test makes (system daemons, another tenant)."""
        with self.lock:
            self._tick()
            self.nodes[node].extra[0] = cores

    def cores(self, node: str) -> float:
        with self.lock:
            return float(self.nodes[node].extra[0] + sum(p.usage[0] for p in self.pods.values() if p.node == node))

    # -- the counters ------------------------------------------------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        dt, self.t = now - self.t, now
        for p in self.pods.values():
            p.cum += p.usage * dt
        for name, n in self.nodes.items():
            used = n.extra + sum((p.usage for p in self.pods.values() if p.node == name), np.zeros(N_FEATURES))
            n.busy += min(float(used[0]), CPUS) * dt
            n.net += used[2:] * dt

    def _node(self, name: str) -> NodeCounters:
        with self.lock:
            self._tick()
            n = self.nodes[name]
            mem = float(n.extra[1] + sum(p.usage[1] for p in self.pods.values() if p.node == name))
            elapsed = time.time() - self.boot
            busy = n.busy + 10.0
            cpu = {str(i): {"user": busy / CPUS, "idle": max(elapsed - busy / CPUS, 0.0)} for i in range(CPUS)}
            return NodeCounters(
                cpu_seconds=cpu,
                memory_total_bytes=float(MEM),
                memory_available_bytes=max(float(MEM) - mem, 0.0),
                net_receive_bytes={"eth0": float(n.net[0])},
                net_transmit_bytes={"eth0": float(n.net[1])},
                disk_read_bytes={"sda": float(n.net[2])},
                disk_written_bytes={"sda": float(n.net[3])},
                uname={"sysname": "Linux", "release": "test", "version": "1", "machine": "x86_64", "domainname": ""},
            )

    def _pods(self, node: str) -> dict[str, np.ndarray]:
        with self.lock:
            self._tick()
            out = {}
            for name, p in self.pods.items():
                if p.node == node:
                    reading = p.cum.copy()
                    reading[1] = p.usage[1]  # the working set is a gauge
                    out[name] = reading
            return out

    # -- serving -----------------------------------------------------------------------------

    def start(self) -> MetricsTwin:
        from wsgiref.simple_server import make_server

        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

        apps: dict[str, Callable[..., Any]] = {}
        for name in self.nodes:
            node_reg = build_registry(NodeCollector(partial(self._node, name), node_name=name))
            apps[f"/nodes/{name}/metrics"] = make_wsgi_app(node_reg, disable_compression=True)
            pod_reg = build_registry(CadvisorCollector(partial(self._pods, name), self.containers))
            apps[f"/nodes/{name}/metrics/cadvisor"] = make_wsgi_app(pod_reg, disable_compression=True)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            inner = apps.get(environ.get("PATH_INFO", ""))
            if inner is None:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"unknown\n"]
            return inner(dict(environ, PATH_INFO="/metrics"), start_response)

        httpd = make_server("127.0.0.1", 0, app, ThreadingWSGIServer, handler_class=_SilentHandler)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics-twin")
        thread.start()
        self._server = (httpd, thread)
        self.address = f"127.0.0.1:{httpd.server_port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            httpd, thread = self._server
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)
            self._server = None

    def scrape_configs(self) -> list[dict[str, Any]]:
        """One node_exporter target and one kubelet cAdvisor target per node (``instance`` = the node's name)."""
        node = {
            "job_name": "node",
            "static_configs": [
                {"targets": [self.address], "labels": {"instance": n, "__metrics_path__": f"/nodes/{n}/metrics"}}
                for n in self.nodes
            ],
        }
        kubelet = {
            "job_name": "kubelet",
            "honor_labels": True,
            "static_configs": [
                {
                    "targets": [self.address],
                    "labels": {
                        "instance": n,
                        "node": n,
                        "metrics_path": "/metrics/cadvisor",
                        "__metrics_path__": f"/nodes/{n}/metrics/cadvisor",
                    },
                }
                for n in self.nodes
            ],
        }
        return [node, kubelet]
